// memory_internal.h: how the rest of the library tells memory timelines (memory.h) where a
// training step is. Not part of the public API.
//
// A sample costs nothing while no MemoryTimeline is alive: one relaxed atomic load.
#pragma once
#include <atomic>

namespace tiny::detail {

/// How many MemoryTimelines are alive (any thread).
extern std::atomic<int> g_live_timelines;

/// Records a sample labelled `label` (an op or node name) in every live timeline.
void timeline_sample_slow(const char* label);

/// Records a sample when a timeline is alive; otherwise does nothing.
inline void timeline_sample(const char* label) {
  if (g_live_timelines.load(std::memory_order_relaxed) != 0) timeline_sample_slow(label);
}

/// The phase of the step that samples are labelled with, on this thread ("forward" by default).
const char* memory_phase();

}  // namespace tiny::detail
