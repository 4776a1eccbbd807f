#pragma once
// The libdw functions the symbolizer calls, as one table. By default they are libdw's own,
// linked directly. With KAIROS_BACKTRACE_PRIVATE_LIBDW (libkairos.so, which a program loads
// with LD_PRELOAD) libdw is loaded with dlmopen into a link-map namespace of its own, with its
// own libelf, libz, liblzma and libbz2, so the profiled program never shares their state with
// kairos. Why not link them statically with hidden symbols, as SQLite is: Debian's libdw.a and
// libelf.a use local-exec TLS (R_X86_64_TPOFF32) and libbz2.a is not position-independent, so
// none of them can go into a shared object. Loaded on first use (a symbolizer is built on a
// kairos thread), never in a signal handler.
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <gelf.h>

#if KAIROS_BACKTRACE_PRIVATE_LIBDW
#include <dlfcn.h>

#include <string>
#include <type_traits>
#endif

#include <kairos/problem.hpp>

namespace kairos::backtrace_detail {

struct libdw_functions {
  decltype(&::dwfl_begin) dwfl_begin;
  decltype(&::dwfl_end) dwfl_end;
  decltype(&::dwfl_linux_proc_find_elf) dwfl_linux_proc_find_elf;
  decltype(&::dwfl_build_id_find_debuginfo) dwfl_build_id_find_debuginfo;
  decltype(&::dwfl_report_begin) dwfl_report_begin;
  decltype(&::dwfl_linux_proc_maps_report) dwfl_linux_proc_maps_report;
  decltype(&::dwfl_report_end) dwfl_report_end;
  decltype(&::dwfl_addrmodule) dwfl_addrmodule;
  decltype(&::dwfl_module_addrinfo) dwfl_module_addrinfo;
  decltype(&::dwfl_module_getsymtab) dwfl_module_getsymtab;
  decltype(&::dwfl_module_getsym_info) dwfl_module_getsym_info;
  decltype(&::dwfl_module_info) dwfl_module_info;
  decltype(&::dwfl_module_getsrc) dwfl_module_getsrc;
  decltype(&::dwfl_lineinfo) dwfl_lineinfo;
  decltype(&::dwfl_module_addrdie) dwfl_module_addrdie;
  decltype(&::dwfl_module_getdwarf) dwfl_module_getdwarf;
  decltype(&::dwarf_attr) dwarf_attr;
  decltype(&::dwarf_formudata) dwarf_formudata;
  decltype(&::dwarf_getsrcfiles) dwarf_getsrcfiles;
  decltype(&::dwarf_filesrc) dwarf_filesrc;
  decltype(&::dwarf_child) dwarf_child;
  decltype(&::dwarf_siblingof) dwarf_siblingof;
  decltype(&::dwarf_tag) dwarf_tag;
  decltype(&::dwarf_haspc) dwarf_haspc;
  decltype(&::dwarf_ranges) dwarf_ranges;
  decltype(&::dwfl_module_nextcu) dwfl_module_nextcu;
  decltype(&::dwarf_getsrc_die) dwarf_getsrc_die;
  decltype(&::dwarf_lineno) dwarf_lineno;
  decltype(&::dwarf_linesrc) dwarf_linesrc;
  // libelf's (libdw's dependency): a module's symbol table read in one pass.
  decltype(&::elf_nextscn) elf_nextscn;
  decltype(&::elf_getscn) elf_getscn;
  decltype(&::elf_getdata) elf_getdata;
  decltype(&::gelf_getshdr) gelf_getshdr;
  decltype(&::gelf_getsym) gelf_getsym;
  // PLT entries named by their relocations (symbolizer.cpp, plt_entries).
  decltype(&::dwfl_module_getelf) dwfl_module_getelf;
  decltype(&::elf_getshdrstrndx) elf_getshdrstrndx;
  decltype(&::gelf_getrela) gelf_getrela;
};

#if KAIROS_BACKTRACE_PRIVATE_LIBDW
struct private_libdw {
  libdw_functions functions{};
  problem failure;  // why it is not loaded; empty: loaded

  private_libdw() {
    void* handle = dlmopen(LM_ID_NEWLM, "libdw.so.1", RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* error = dlerror();
      failure = problem{std::string{"cannot load libdw.so.1 into a namespace of its own: "} +
                        (error ? error : "unknown error")};
      return;
    }
    bool all = true;
    auto find = [&](auto& slot, const char* name) {
      slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(dlsym(handle, name));
      all = all && slot != nullptr;
    };
    auto& f = functions;
    find(f.dwfl_begin, "dwfl_begin");
    find(f.dwfl_end, "dwfl_end");
    find(f.dwfl_linux_proc_find_elf, "dwfl_linux_proc_find_elf");
    find(f.dwfl_build_id_find_debuginfo, "dwfl_build_id_find_debuginfo");
    find(f.dwfl_report_begin, "dwfl_report_begin");
    find(f.dwfl_linux_proc_maps_report, "dwfl_linux_proc_maps_report");
    find(f.dwfl_report_end, "dwfl_report_end");
    find(f.dwfl_addrmodule, "dwfl_addrmodule");
    find(f.dwfl_module_addrinfo, "dwfl_module_addrinfo");
    find(f.dwfl_module_getsymtab, "dwfl_module_getsymtab");
    find(f.dwfl_module_getsym_info, "dwfl_module_getsym_info");
    find(f.dwfl_module_info, "dwfl_module_info");
    find(f.dwfl_module_getsrc, "dwfl_module_getsrc");
    find(f.dwfl_lineinfo, "dwfl_lineinfo");
    find(f.dwfl_module_addrdie, "dwfl_module_addrdie");
    find(f.dwfl_module_getdwarf, "dwfl_module_getdwarf");
    find(f.dwarf_attr, "dwarf_attr");
    find(f.dwarf_formudata, "dwarf_formudata");
    find(f.dwarf_getsrcfiles, "dwarf_getsrcfiles");
    find(f.dwarf_filesrc, "dwarf_filesrc");
    find(f.dwarf_child, "dwarf_child");
    find(f.dwarf_siblingof, "dwarf_siblingof");
    find(f.dwarf_tag, "dwarf_tag");
    find(f.dwarf_haspc, "dwarf_haspc");
    find(f.dwarf_ranges, "dwarf_ranges");
    find(f.dwfl_module_nextcu, "dwfl_module_nextcu");
    find(f.dwarf_getsrc_die, "dwarf_getsrc_die");
    find(f.dwarf_lineno, "dwarf_lineno");
    find(f.dwarf_linesrc, "dwarf_linesrc");
    find(f.elf_nextscn, "elf_nextscn");  // found through libdw's dependencies
    find(f.elf_getscn, "elf_getscn");
    find(f.elf_getdata, "elf_getdata");
    find(f.gelf_getshdr, "gelf_getshdr");
    find(f.gelf_getsym, "gelf_getsym");
    find(f.dwfl_module_getelf, "dwfl_module_getelf");
    find(f.elf_getshdrstrndx, "elf_getshdrstrndx");
    find(f.gelf_getrela, "gelf_getrela");
    if (!all) failure = problem{"libdw.so.1 lacks a function kairos needs"};
  }
};

inline private_libdw& private_libdw_instance() {
  static auto* instance = new private_libdw;  // never unloaded: its functions may run until exit
  return *instance;
}

// nullptr when libdw could not be loaded (then libdw_problem() says why).
inline const libdw_functions* libdw() {
  auto& instance = private_libdw_instance();
  return instance.failure ? nullptr : &instance.functions;
}
inline problem libdw_problem() { return private_libdw_instance().failure; }
#else
inline const libdw_functions* libdw() {
  static constexpr libdw_functions linked{&::dwfl_begin,
                                          &::dwfl_end,
                                          &::dwfl_linux_proc_find_elf,
                                          &::dwfl_build_id_find_debuginfo,
                                          &::dwfl_report_begin,
                                          &::dwfl_linux_proc_maps_report,
                                          &::dwfl_report_end,
                                          &::dwfl_addrmodule,
                                          &::dwfl_module_addrinfo,
                                          &::dwfl_module_getsymtab,
                                          &::dwfl_module_getsym_info,
                                          &::dwfl_module_info,
                                          &::dwfl_module_getsrc,
                                          &::dwfl_lineinfo,
                                          &::dwfl_module_addrdie,
                                          &::dwfl_module_getdwarf,
                                          &::dwarf_attr,
                                          &::dwarf_formudata,
                                          &::dwarf_getsrcfiles,
                                          &::dwarf_filesrc,
                                          &::dwarf_child,
                                          &::dwarf_siblingof,
                                          &::dwarf_tag,
                                          &::dwarf_haspc,
                                          &::dwarf_ranges,
                                          &::dwfl_module_nextcu,
                                          &::dwarf_getsrc_die,
                                          &::dwarf_lineno,
                                          &::dwarf_linesrc,
                                          &::elf_nextscn,
                                          &::elf_getscn,
                                          &::elf_getdata,
                                          &::gelf_getshdr,
                                          &::gelf_getsym,
                                          &::dwfl_module_getelf,
                                          &::elf_getshdrstrndx,
                                          &::gelf_getrela};
  return &linked;
}
inline problem libdw_problem() { return {}; }
#endif

}  // namespace kairos::backtrace_detail
