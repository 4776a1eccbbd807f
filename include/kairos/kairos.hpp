#pragma once
// The whole core but JSON: bundlers, built-in components, storage and text reports, introspection.
// JSON is left out: nlohmann_json alone would cost each file that includes this header more than
// the rest of the core. A file that reads or writes JSON (to_json, write_json, read_json, or
// report_at_exit with a json_path) includes <kairos/report_json.hpp> itself.
// Smaller headers let a translation unit pay only for what it uses:
//   <kairos/component_tuple.hpp>  measuring only, no global state
//   <kairos/auto_tuple.hpp>       scoped bundles recorded into the call graph, KAIROS_REGION
//   <kairos/report.hpp>           the merged report as data and text; <kairos/report_json.hpp> JSON
//   <kairos/components/wall_clock.hpp>, ...  one component each
#include <kairos/auto_tuple.hpp>
#include <kairos/component_list.hpp>
#include <kairos/component_tuple.hpp>
#include <kairos/components.hpp>
#include <kairos/describe.hpp>
#include <kairos/report.hpp>
#include <kairos/report_at_exit.hpp>
#include <kairos/scoped.hpp>
