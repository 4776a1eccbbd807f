#pragma once
// The empty profile database (create_schema's tables, views and schema_version, rollback journal)
// as a file image, made at build time by schema_image_generator.cpp; create_profile copies it.
#include <cstddef>

namespace kairos::database {

extern const unsigned char schema_image[];
extern const std::size_t schema_image_size;

}  // namespace kairos::database
