/* The contract between a program built with XRay (kairos_instrument(... XRAY)) and libkairos.so
 * (internal, versioned). XRay's runtime is linked statically into the program with its symbols
 * hidden, so libkairos.so cannot find them: kairos_xray.cpp, compiled into the program, hands
 * libkairos.so this table of XRay's own functions at start-up, and kairos patches the sleds
 * through it. */
#ifndef KAIROS_XRAY_API_H
#define KAIROS_XRAY_API_H

#include <stddef.h>
#include <stdint.h>

#define KAIROS_XRAY_API_VERSION 1

struct kairos_xray_api {
  int version;
  /* XRay's functions, with its enums as int (XRayEntryType, XRayPatchingStatus). */
  int (*set_handler)(void (*handler)(int32_t function_id, int entry_type));
  int (*remove_handler)(void);
  int (*patch)(void);
  int (*unpatch)(void);
  int (*patch_function)(int32_t function_id);
  int (*unpatch_function)(int32_t function_id);
  uintptr_t (*function_address)(int32_t function_id);
  size_t (*max_function_id)(void);
};

/* Exported by libkairos.so. */
typedef void (*kairos_xray_attach_function)(const struct kairos_xray_api*);

#endif
