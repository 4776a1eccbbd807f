#pragma once
// The whole core: bundlers, built-in components, introspection.
// Smaller headers let a translation unit pay only for what it uses:
//   <kairos/component_tuple.hpp>, <kairos/component_list.hpp>, <kairos/components/wall_clock.hpp>, ...
#include <kairos/component_list.hpp>
#include <kairos/component_tuple.hpp>
#include <kairos/components.hpp>
#include <kairos/describe.hpp>
