/* The contract between libkairos-user.so and libkairos.so (internal, versioned).
 * libkairos.so exports kairos_runtime_entry_points(); libkairos-user.so exports
 * kairos_user_attach(). Whichever library initializes second connects them: the runtime's
 * constructor calls kairos_user_attach() if the user library is loaded; the user library's
 * constructor (and a dlopen of it later) asks for the runtime's entry points. */
#ifndef KAIROS_ENTRY_POINTS_H
#define KAIROS_ENTRY_POINTS_H

#define KAIROS_ENTRY_POINTS_VERSION 2

struct kairos_entry_points {
  int version;
  void (*push_region)(const char*);
  void (*pop_region)(const char*);
  void (*start)(void);
  void (*stop)(void);
  void (*disable_thread)(void);
  void (*enable_thread)(void);
  int (*is_active)(void);
  void (*progress)(const char*);
  void (*progress_begin)(const char*);
  void (*progress_end)(const char*);
};

typedef const struct kairos_entry_points* (*kairos_runtime_entry_points_function)(void);
typedef void (*kairos_user_attach_function)(const struct kairos_entry_points*);

#endif
