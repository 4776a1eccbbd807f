#pragma once
// The per-process profile database: schema, writer, and the outputs derived from it.
#include <kairos/plugins/database/outputs.hpp>
#include <kairos/plugins/database/schema.hpp>
#include <kairos/plugins/database/sqlite.hpp>
#include <kairos/plugins/database/writer.hpp>
