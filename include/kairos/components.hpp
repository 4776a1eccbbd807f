#pragma once
// Every built-in component (no dependency beyond the C++ and POSIX libraries).
#include <kairos/components/context_switches.hpp>
#include <kairos/components/cpu_clock.hpp>
#include <kairos/components/page_faults.hpp>
#include <kairos/components/page_rss.hpp>
#include <kairos/components/peak_rss.hpp>
#include <kairos/components/system_clock.hpp>
#include <kairos/components/thread_cpu_clock.hpp>
#include <kairos/components/user_clock.hpp>
#include <kairos/components/wall_clock.hpp>
