#pragma once
// The user-API contract header, from the runtime's side.
#include "user/entry_points.h"
