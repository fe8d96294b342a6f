// The window's background threads (a decoder's forward, the grid's thumbnails) run below the frame loop's priority:
// on a 2-core machine a forward at 8192 tokens keeps both cores busy for a minute, and at equal priority the frame
// loop (and Mesa's software renderer under Xvfb) waited for its turn, 97 ms a frame at the 95th percentile
// (`bench --gui --json`, model_forward case). At nice 10 the frame loop's threads outweigh it about 9 to 1 when both
// want a core, and the forward has every core the frame loop leaves idle.
#pragma once

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace app {

// Lowers the calling thread's scheduling priority to `niceness` (Linux: nice is per thread). Threads it starts
// afterwards inherit it, OpenMP's team included (libgomp makes a team's threads from the thread that first enters
// a parallel region). Best effort: a refusal leaves the priority as it was.
inline void lowerThisThreadsPriority(int niceness = 10)
{
    (void)setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), niceness);
}

} // namespace app
