#include "apps/job_errors.h"

#include <cstdio>
#include <exception>
#include <string>

#include "core/error.h"

namespace fathom::apps {

int run_reporting_errors(const parallel::Runtime& runtime, const std::function<int()>& body) {
  const auto fail = [&](const std::string& message) {
    if (runtime.size() > 1) runtime.abort(message);
    std::fprintf(stderr, "fathom: %s\n", message.c_str());
    return 1;
  };
  try {
    return body();
  } catch (const Error& e) {
    return fail(e.message());
  } catch (const std::exception& e) {
    return fail(e.what());
  }
}

}  // namespace fathom::apps
