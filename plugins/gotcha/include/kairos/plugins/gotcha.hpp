#pragma once
// kairos::gotcha<N, Bundle>: wraps up to N shared-library functions by symbol name, without
// touching their source, by rewriting the GOT slots that bind them (see gotcha/patcher.hpp).
//
// Bundle form: around each call, on a Bundle labelled with the function's name:
//   construct, start(), audit(args...), the original, audit(return value) (not for void), stop().
// Replace form: when Bundle can be called as
//   R operator()(const kairos::gotcha_data&, R (*original)(Args...), Args...)
// the wrapper constructs it and calls it instead, and it decides whether and how to call the
// original (the seed's fork/exit function-wrapper example).
//
//   using traced = kairos::gotcha<2, kairos::component_tuple<kairos::wall_clock>>;
//   traced::wrap<0, int(const char*)>("puts");
//   traced::wrap<1, std::size_t(const char*)>("strlen");
//   ...
//   traced::unwrap_all();
#include <dlfcn.h>

#include <atomic>
#include <cstddef>
#include <string>
#include <string_view>
#include <type_traits>

#include <kairos/operations.hpp>
#include <kairos/plugins/gotcha/call_through.hpp>
#include <kairos/plugins/gotcha/gotcha_data.hpp>
#include <kairos/plugins/gotcha/patcher.hpp>
#include <kairos/plugins/gotcha/reentry_guard.hpp>

#ifndef KAIROS_GOTCHA_AVAILABLE
#define KAIROS_GOTCHA_AVAILABLE 0
#endif

namespace kairos {

template <std::size_t N, class Bundle, class Tag = void>
struct gotcha {
  static_assert(N > 0, "gotcha<N, ...> wraps at least one function");

  static constexpr bool available_at_build = KAIROS_GOTCHA_AVAILABLE != 0;
  static constexpr std::string_view label() { return "gotcha"; }
  static constexpr std::string_view description() {
    return "wraps shared-library functions by patching their GOT slots";
  }
  static bool available() { return available_at_build && gotcha_patcher::available(); }
  static std::string unavailable_reason() {
    if (available()) return {};
    return "kairos::gotcha needs ELF dynamic linking on x86-64 Linux (dl_iterate_phdr, link.h); "
           "this build has none, so nothing is wrapped";
  }

  // Wraps `symbol` ("name" or "name@VERSION") with slot I, whose function type is `Function`
  // (e.g. `int(int, int)`). The status's failure says what went wrong, if anything; the caller prints it.
  template <std::size_t I, class Function>
  static gotcha_patcher::wrap_status wrap(std::string_view symbol) {
    static_assert(I < N, "slot index out of range: gotcha<N, ...> has slots 0..N-1");
    return slot<I, Function>::install(symbol);
  }
  // The same, taking the function type from a pointer: wrap<0>("puts", &std::puts).
  template <std::size_t I, class R, class... Args>
  static gotcha_patcher::wrap_status wrap(std::string_view symbol, R (*)(Args...)) {
    return wrap<I, R(Args...)>(symbol);
  }

  // Records what start() will wrap, for use as a member of a bundle.
  template <std::size_t I, class Function>
  static void configure(std::string_view symbol) {
    static_assert(I < N, "slot index out of range: gotcha<N, ...> has slots 0..N-1");
    slot<I, Function>::configure(symbol);
  }

  template <std::size_t I>
  static bool unwrap() {
    return slot_control<I>::unwrap();
  }
  static void unwrap_all() {
    [&]<std::size_t... I>(std::index_sequence<I...>) { (slot_control<I>::unwrap(), ...); }
    (std::make_index_sequence<N>{});
  }
  template <std::size_t I>
  static bool is_wrapped() {
    return slot_control<I>::installed.load(std::memory_order_acquire);
  }
  // The wrapper function of slot I (what dlsym returns for the wrapped name).
  template <std::size_t I>
  static void* wrapper_address() {
    return slot_control<I>::bound.wrapper;
  }

  // What the wrapper of slot I calls: the original, or the wrapper installed before it.
  template <std::size_t I>
  static void* next_address() {
    return slot_control<I>::bound.next.load(std::memory_order_acquire);
  }

  // As a bundle member: the first start() wraps every configured slot, the last stop() unwraps.
  void start() {
    if (users().fetch_add(1, std::memory_order_acq_rel) == 0) [&]<std::size_t... I>(std::index_sequence<I...>) {
        ((slot_control<I>::install_configured != nullptr ? void(slot_control<I>::install_configured()) : void()), ...);
      }
    (std::make_index_sequence<N>{});
  }
  void stop() {
    if (users().fetch_sub(1, std::memory_order_acq_rel) == 1) unwrap_all();
  }

 private:
  static std::atomic<int>& users() {
    static std::atomic<int> count{0};
    return count;
  }

  // What slot I holds whatever its function type: the binding and its description.
  template <std::size_t I>
  struct slot_control {
    static inline gotcha_patcher::binding bound{};
    static inline std::string name{};
    static inline std::string version{};
    static inline gotcha_data data{};
    static inline std::atomic<bool> installed{false};
    static inline gotcha_patcher::wrap_status (*install_configured)() = nullptr;
    static inline std::string configured_symbol{};
    // On this thread, the wrapper of slot I is running: a recursive call goes straight through.
    [[gnu::tls_model("initial-exec")]] static inline thread_local constinit bool active = false;

    static bool unwrap() {
      if (!installed.exchange(false, std::memory_order_acq_rel)) return false;
      return gotcha_patcher::remove(bound);
    }
  };

  template <std::size_t I, class Function>
  struct slot;

  template <std::size_t I, class R, class... Args>
  struct slot<I, R(Args...)> {
    using control = slot_control<I>;
    using function_pointer = R (*)(Args...);
    static constexpr bool replaces = std::is_invocable_r_v<R, Bundle&, const gotcha_data&, function_pointer, Args...>;

    static gotcha_patcher::wrap_status install(std::string_view symbol) {
      gotcha_patcher::wrap_status status;
      status.symbol = std::string{symbol};
      if constexpr (!available_at_build) {
        status.failure = problem{"gotcha: cannot wrap '" + status.symbol + "': " + unavailable_reason()};
      } else if (control::installed.load(std::memory_order_acquire)) {
        status.failure =
            problem{"gotcha: slot " + std::to_string(I) + " already wraps '" + control::bound.symbol + "'; unwrap<" +
                    std::to_string(I) + ">() before wrapping '" + status.symbol + "' with it"};
      } else {
        control::bound.symbol = std::string{symbol};
        const auto at = symbol.find('@');
        control::name = std::string{symbol.substr(0, at)};
        control::version = at == std::string_view::npos ? std::string{} : std::string{symbol.substr(at + 1)};
        control::data = gotcha_data{control::name, control::version, I};
        control::bound.wrapper = reinterpret_cast<void*>(&wrapper);
        status = gotcha_patcher::install(control::bound);
        control::installed.store(status.installed, std::memory_order_release);
      }
      return status;  // the caller says what went wrong (status.failure), where it reports
    }

    static void configure(std::string_view symbol) {
      control::configured_symbol = std::string{symbol};
      control::install_configured = [] { return install(control::configured_symbol); };
    }

    static Bundle make_bundle() {
      if constexpr (std::is_constructible_v<Bundle, std::string_view>)
        return Bundle{std::string_view{control::name}};
      else if constexpr (std::is_constructible_v<Bundle, const char*>)
        return Bundle{control::name.c_str()};
      else
        return Bundle{};
    }

    static function_pointer next() {
      return reinterpret_cast<function_pointer>(control::bound.next.load(std::memory_order_acquire));
    }
    // What a replacement gets as its `original`: the next function, called through kairos's
    // call_through frame, so a profile tells the call's time (the program's) from the
    // replacement's own (kairos's).
    static R call_next(Args... args) { return call_through(next(), args...); }

    static R wrapper(Args... args) {
      if (gotcha_patcher::inside_kairos || control::active) return call_next(args...);
      control::active = true;
      struct leave {
        ~leave() { control::active = false; }
      } on_return;
      if constexpr (replaces) {
        Bundle replacement = [] {
          gotcha_patcher::inside_kairos_scope guard;
          return make_bundle();
        }();
        auto call = control::data;
        call.caller = __builtin_extract_return_addr(__builtin_return_address(0));
        return replacement(call, &call_next, args...);
      } else {
        Bundle bundle = [] {
          gotcha_patcher::inside_kairos_scope guard;
          return make_bundle();
        }();
        {
          gotcha_patcher::inside_kairos_scope guard;
          invoke_best<op::start>(bundle);
          invoke_best<op::audit>(bundle, args...);
        }
        if constexpr (std::is_void_v<R>) {
          call_next(args...);
          gotcha_patcher::inside_kairos_scope guard;
          invoke_best<op::stop>(bundle);
        } else {
          R result = call_next(args...);
          gotcha_patcher::inside_kairos_scope guard;
          invoke_best<op::audit>(bundle, result);
          invoke_best<op::stop>(bundle);
          return result;
        }
      }
    }
  };
};

// One row of a table of functions to wrap, each by a gotcha<1, ...> of its own (a replacement and a
// tag that tells the rows apart):
//   template <call C> using wrapper = kairos::gotcha<1, interceptor<C>, std::integral_constant<call, C>>;
//   const std::array table{wrapped_symbol::of<wrapper<call::open>, int(const char*, int)>("open"), ...};
//   const auto failed = wrap_each(table);
struct wrapped_symbol {
  const char* symbol;
  gotcha_patcher::wrap_status (*wrap)(std::string_view);
  bool (*unwrap)();

  template <class Gotcha, class Function>
  static constexpr wrapped_symbol of(const char* symbol) {
    return {symbol, &Gotcha::template wrap<0, Function>, &Gotcha::template unwrap<0>};
  }
};

// Whether a row whose symbol no loaded object defines yet is wrapped anyway (its binding waits for
// a library loaded later) or passed over (an older library without that entry point).
enum class absent_symbols { wrapped, passed_over };

// Installs every row's wrapper. Returns the symbols whose wrapper could not be installed, joined by
// ", ": empty when all were. Runs the patcher, so callers hold their re-entry guard.
template <class Rows>
std::string wrap_each(const Rows& rows, absent_symbols absent = absent_symbols::wrapped) {
  std::string failed;
  for (const wrapped_symbol& row : rows) {
    if (absent == absent_symbols::passed_over && dlsym(RTLD_DEFAULT, row.symbol) == nullptr) continue;
    if (row.wrap(row.symbol).installed) continue;
    failed += (failed.empty() ? "" : ", ") + std::string{row.symbol};
  }
  return failed;
}

}  // namespace kairos
