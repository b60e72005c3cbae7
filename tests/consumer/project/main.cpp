// A user's program built against the installed package: include the umbrella header, make
// tensors, run an op, and print "consumer: ok" when the result is right.
#include <fathom.h>

#include <cstdio>

int main() {
  const fathom::Tensor a = fathom::Tensor::arange(6).reshape({2, 3});
  const fathom::Tensor b = fathom::Tensor::from_vector<float>({10, 20, 30});
  const std::vector<float> sum = fathom::add(a, b).to_vector<float>();
  const std::vector<float> expected = {10, 21, 32, 13, 24, 35};
  if (sum != expected) {
    std::puts("consumer: wrong result");
    return 1;
  }
  std::puts("consumer: ok");
  return 0;
}
