#pragma once
// The bundles most code wants: measured from construction to destruction and recorded into the
// calling thread's call graph, so they appear in kairos::report().
//
//   kairos::auto_tuple<kairos::wall_clock, kairos::peak_rss> region{"solve"};
//   KAIROS_REGION("solve");   // the default bundle (wall_clock), with file and line
//
// With or without storage, plainly:
//   component_tuple<Ts...>          measure only, by hand: start()/stop()
//   scoped<component_tuple<Ts...>>  measure only, started and stopped by scope
//   stored<component_tuple<Ts...>>  measure and record, by hand
//   auto_tuple<Ts...>               measure and record, by scope (= scoped<stored<component_tuple>>)
#include <kairos/component_list.hpp>
#include <kairos/component_tuple.hpp>
#include <kairos/components/wall_clock.hpp>
#include <kairos/scoped.hpp>
#include <kairos/storage/stored.hpp>

namespace kairos {

template <class... Components>
using auto_tuple = scoped<stored<component_tuple<Components...>>>;

template <class... Components>
using auto_list = scoped<stored<component_list<Components...>>>;

// What KAIROS_REGION measures.
using region_bundle = component_tuple<wall_clock>;

}  // namespace kairos

#define KAIROS_DETAIL_CONCAT_(a, b) a##b
#define KAIROS_DETAIL_CONCAT(a, b) KAIROS_DETAIL_CONCAT_(a, b)

// A region from here to the end of the enclosing scope, recorded with the file and line.
#define KAIROS_REGION(name)                                                                      \
  ::kairos::auto_tuple<::kairos::region_bundle> KAIROS_DETAIL_CONCAT(kairos_region_, __LINE__) { \
    name, ::kairos::storage_options { ::kairos::default_storage_mode(), __FILE__, __LINE__ }     \
  }
