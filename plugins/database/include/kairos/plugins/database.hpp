#pragma once
// The per-process profile database: schema, writer, the outputs derived from it (a causal
// profile's too), the merge of many into one, and the tools' commands over them.
#include <kairos/plugins/database/causal.hpp>
#include <kairos/plugins/database/commands.hpp>
#include <kairos/plugins/database/merge.hpp>
#include <kairos/plugins/database/outputs.hpp>
#include <kairos/plugins/database/region_block.hpp>
#include <kairos/plugins/database/schema.hpp>
#include <kairos/plugins/database/sqlite.hpp>
#include <kairos/plugins/database/writer.hpp>
