#pragma once
// How every fathom command ends on an error: the message (not a source location) on stderr as
// "fathom: <message>", exit status 1, and in a job of several ranks an abort that ends every
// rank with that message (the others may be waiting for the failed one in a collective).

#include <functional>

#include "parallel/runtime.h"

namespace fathom::apps {

// Runs `body`, returning its exit status, or reports what it threw as above.
int run_reporting_errors(const parallel::Runtime& runtime, const std::function<int()>& body);

}  // namespace fathom::apps
