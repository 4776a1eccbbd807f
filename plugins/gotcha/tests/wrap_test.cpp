// Real GOT patching in a real process. This program and its libraries are built three ways (lazy
// binding, full RELRO, -fno-plt); every case runs in its own process (one ctest test per case).
#include <dlfcn.h>
#include <pthread.h>
#include <unwind.h>

#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include <kairos/component_tuple.hpp>
#include <kairos/plugins/gotcha.hpp>

#include "target_library.hpp"

#ifndef KGT_LATER_LIBRARY
#error "KGT_LATER_LIBRARY must name the library loaded with dlopen"
#endif

namespace {

// Sees what a bundle member sees, and keeps it for the checks.
struct call_log {
  static inline std::vector<std::string> events;
  static void reset() { events.clear(); }

  void start() { events.push_back("start"); }
  // kgt_add's arguments, and any one int: an int argument or an int return value.
  void audit(int a, int b) { events.push_back("audit " + std::to_string(a) + " " + std::to_string(b)); }
  void audit(int value) { events.push_back("audit " + std::to_string(value)); }
  void stop() { events.push_back("stop"); }
};

using logged = kairos::gotcha<4, kairos::component_tuple<call_log>>;

// A bundle of our own: keeps the label it was constructed with.
struct labelled_bundle {
  static inline std::vector<std::string> labels;
  explicit labelled_bundle(std::string_view label) { labels.emplace_back(label); }
  void start() {}
  void stop() {}
};

std::size_t count(std::string_view event) {
  std::size_t n = 0;
  for (const auto& e : call_log::events) n += e == event;
  return n;
}

// An absolute function pointer in data: an R_X86_64_64 relocation against kgt_add.
extern "C" int (*kgt_add_pointer_in_data)(int, int);
int (*kgt_add_pointer_in_data)(int, int) = &kgt_add;

struct unwrap_at_end {
  ~unwrap_at_end() { logged::unwrap_all(); }
};

}  // namespace

namespace {

// The return addresses above this function's frame, innermost first (libgcc's unwinder, which
// reads the CFI of every frame: the assembly of kairos_call_through's included).
[[gnu::noinline]] std::vector<std::uintptr_t> callers_of_this_frame(int) {
  std::vector<std::uintptr_t> frames;
  _Unwind_Backtrace(
      [](_Unwind_Context* context, void* found) {
        static_cast<std::vector<std::uintptr_t>*>(found)->push_back(_Unwind_GetIP(context));
        return _URC_NO_REASON;
      },
      &frames);
  if (!frames.empty()) frames.erase(frames.begin());  // this function's own
  return frames;
}

bool in_call_through(std::uintptr_t return_address) {
  const auto range = kairos::gotcha_patcher::call_through_range();
  const auto address = return_address - 1;  // inside the call instruction
  return address >= reinterpret_cast<std::uintptr_t>(range.begin) &&
         address < reinterpret_cast<std::uintptr_t>(range.end);
}

}  // namespace

TEST_CASE("call_through leaves one invoker frame, then kairos_call_through's, under the called function") {
  auto* function = &callers_of_this_frame;  // a pointer, as a wrapper's original is
  const auto frames = kairos::call_through(function, 7);
  REQUIRE(frames.size() >= 3);
  CHECK_FALSE(in_call_through(frames[0]));  // the invoker, which called the function
  CHECK(in_call_through(frames[1]));        // kairos_call_through, which called the invoker
  CHECK_FALSE(in_call_through(frames[2]));  // this test, which called kairos_call_through
  CHECK(kairos::call_through([](int a, int b) { return a * b; }, 6, 7) == 42);
}

TEST_CASE("the wrapper runs and the original still returns the right value") {
  unwrap_at_end cleanup;
  call_log::reset();
  const auto status = logged::wrap<0, int(int, int)>("kgt_add");
  REQUIRE(status.ok());
  CHECK(kgt_add(2, 3) == 5);
  CHECK(count("start") == 1);
  CHECK(count("stop") == 1);
}

TEST_CASE("arguments and the return value reach audit, between start and stop") {
  unwrap_at_end cleanup;
  call_log::reset();
  REQUIRE(logged::wrap<0, int(int, int)>("kgt_add").ok());
  CHECK(kgt_add(20, 22) == 42);
  CHECK(call_log::events == std::vector<std::string>{"start", "audit 20 22", "audit 42", "stop"});
}

TEST_CASE("the bundle is labelled with the wrapped function's name") {
  using labelled = kairos::gotcha<1, labelled_bundle>;
  labelled_bundle::labels.clear();
  REQUIRE(labelled::wrap<0, int(int, int)>("kgt_add").ok());
  CHECK(kgt_add(1, 1) == 2);
  labelled::unwrap_all();
  CHECK(labelled_bundle::labels == std::vector<std::string>{"kgt_add"});
}

TEST_CASE("a wrapper's address names the function it wraps, without its version, after removal too") {
  using named = kairos::gotcha<2, labelled_bundle, struct named_tag>;
  REQUIRE(named::wrap<0, int(int, int)>("kgt_add").ok());
  REQUIRE(named::wrap<1, int(pthread_cond_t*, pthread_mutex_t*)>("pthread_cond_wait@GLIBC_2.3.2").defined);
  void* add_wrapper = named::wrapper_address<0>();
  CHECK(kairos::gotcha_patcher::wrapped_symbol(add_wrapper) == "kgt_add");
  CHECK(kairos::gotcha_patcher::wrapped_symbol(named::wrapper_address<1>()) == "pthread_cond_wait");
  named::unwrap_all();
  CHECK(kairos::gotcha_patcher::wrapped_symbol(add_wrapper) == "kgt_add");  // samples taken before
  CHECK(kairos::gotcha_patcher::wrapped_symbol(reinterpret_cast<void*>(&kgt_add)).empty());
}

TEST_CASE("a void function is wrapped and gets no return-value audit") {
  unwrap_at_end cleanup;
  call_log::reset();
  REQUIRE(logged::wrap<1>("kgt_store", &kgt_store).ok());
  int destination = 0;
  kgt_store(&destination, 7);
  CHECK(destination == 7);
  CHECK(call_log::events == std::vector<std::string>{"start", "stop"});
}

TEST_CASE("a call inside the library through its own PLT/GOT slot is wrapped") {
  unwrap_at_end cleanup;
  call_log::reset();
  REQUIRE(logged::wrap<0, int(int, int)>("kgt_add").ok());
  CHECK(kgt_add_inside_library(4, 5) == 9);
  CHECK(count("audit 4 5") == 1);
}

TEST_CASE("a function pointer relocated into data (R_X86_64_64) is wrapped and restored") {
  call_log::reset();
  void* original = dlsym(RTLD_DEFAULT, "kgt_add");
  REQUIRE(reinterpret_cast<void*>(kgt_add_pointer_in_data) == original);
  REQUIRE(logged::wrap<0, int(int, int)>("kgt_add").ok());
  CHECK(reinterpret_cast<void*>(kgt_add_pointer_in_data) == logged::wrapper_address<0>());
  CHECK(kgt_add_pointer_in_data(6, 7) == 13);
  CHECK(count("audit 6 7") == 1);
  logged::unwrap_all();
  CHECK(reinterpret_cast<void*>(kgt_add_pointer_in_data) == original);
}

TEST_CASE("a library loaded with dlopen after wrapping is wrapped") {
  unwrap_at_end cleanup;
  call_log::reset();
  REQUIRE(logged::wrap<0, int(int, int)>("kgt_add").ok());
  // A bare name: found through this program's RUNPATH, as if the program had called dlopen.
  void* later = dlopen(KGT_LATER_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  REQUIRE_MESSAGE(later != nullptr, dlerror());
  auto later_add = reinterpret_cast<int (*)(int, int)>(dlsym(later, "kgt_later_add"));
  REQUIRE(reinterpret_cast<void*>(later_add) != nullptr);
  CHECK(later_add(8, 9) == 17);
  CHECK(count("audit 8 9") == 1);
  dlclose(later);
}

TEST_CASE("dlsym of a wrapped name returns the wrapper while RTLD_NEXT still finds the original") {
  unwrap_at_end cleanup;
  call_log::reset();
  void* original = dlsym(RTLD_DEFAULT, "kgt_add");
  REQUIRE(logged::wrap<0, int(int, int)>("kgt_add").ok());
  void* looked_up = dlsym(RTLD_DEFAULT, "kgt_add");
  CHECK(looked_up == logged::wrapper_address<0>());
  CHECK(reinterpret_cast<int (*)(int, int)>(looked_up)(10, 11) == 21);
  CHECK(count("audit 10 11") == 1);
  CHECK(dlsym(RTLD_NEXT, "kgt_add") == original);
  CHECK(dlsym(RTLD_DEFAULT, "kgt_store") == reinterpret_cast<void*>(&kgt_store));  // not wrapped
}

TEST_CASE("unwrapping restores every slot and the original behaviour") {
  call_log::reset();
  void* original = dlsym(RTLD_DEFAULT, "kgt_add");
  REQUIRE(logged::wrap<0, int(int, int)>("kgt_add").ok());
  const void* wrapper = logged::wrapper_address<0>();
  const auto wrapped = kairos::gotcha_patcher::count_slots("kgt_add", wrapper);
  CHECK(wrapped.binding_symbol >= 2);  // this program's slot(s) and the library's own
  CHECK(wrapped.holding_value == wrapped.binding_symbol);
  CHECK(logged::unwrap<0>());
  CHECK(kairos::gotcha_patcher::count_slots("kgt_add", wrapper).holding_value == 0);
  CHECK(kairos::gotcha_patcher::count_slots("kgt_add", original).holding_value == wrapped.binding_symbol);
  call_log::reset();
  CHECK(kgt_add(1, 2) == 3);
  CHECK(call_log::events.empty());
  CHECK(dlsym(RTLD_DEFAULT, "kgt_add") == original);
  CHECK_FALSE(logged::unwrap<0>());  // already out
}

TEST_CASE("a recursive call from the wrapped function itself goes straight through") {
  unwrap_at_end cleanup;
  call_log::reset();
  REQUIRE(logged::wrap<2, int(int)>("kgt_countdown").ok());
  CHECK(kgt_countdown(5) == 5);
  // One bundle: the argument 5, then the return value 5; the inner calls went straight through.
  CHECK(call_log::events == std::vector<std::string>{"start", "audit 5", "audit 5", "stop"});
}

namespace {
// A member that itself calls a wrapped function: that call runs inside kairos, so it goes straight
// through instead of recursing into the wrapper.
struct calls_wrapped_function {
  static inline int starts = 0;
  static inline int inner_result = 0;
  void start() {
    ++starts;
    inner_result = kgt_add(100, 1);
  }
};
}  // namespace

TEST_CASE("a wrapped function called from inside kairos goes straight through") {
  using reentrant = kairos::gotcha<1, kairos::component_tuple<calls_wrapped_function>>;
  REQUIRE(reentrant::wrap<0, int(int, int)>("kgt_add").ok());
  CHECK(kgt_add(1, 2) == 3);
  reentrant::unwrap_all();
  CHECK(calls_wrapped_function::starts == 1);
  CHECK(calls_wrapped_function::inner_result == 101);
}

namespace {
template <char Name>
struct order_marker {
  static inline std::string* order = nullptr;
  void start() { *order += std::string{"start "} + Name + ";"; }
  void stop() { *order += std::string{"stop "} + Name + ";"; }
};
struct first_tag;
struct second_tag;
}  // namespace

TEST_CASE("two wrappers of one symbol stack: the later one is outermost, either can go first") {
  std::string order;
  order_marker<'A'>::order = &order;
  order_marker<'B'>::order = &order;
  using first = kairos::gotcha<1, kairos::component_tuple<order_marker<'A'>>, first_tag>;
  using second = kairos::gotcha<1, kairos::component_tuple<order_marker<'B'>>, second_tag>;
  void* original = dlsym(RTLD_DEFAULT, "kgt_add");
  REQUIRE(first::wrap<0, int(int, int)>("kgt_add").ok());
  REQUIRE(second::wrap<0, int(int, int)>("kgt_add").ok());
  CHECK(second::next_address<0>() == first::wrapper_address<0>());
  CHECK(kgt_add(1, 2) == 3);
  CHECK(order == "start B;start A;stop A;stop B;");

  // Taking out the inner one first: the outer one now calls the original.
  CHECK(first::unwrap<0>());
  CHECK(second::next_address<0>() == original);
  order.clear();
  CHECK(kgt_add(2, 2) == 4);
  CHECK(order == "start B;stop B;");

  CHECK(second::unwrap<0>());
  order.clear();
  CHECK(kgt_add(3, 3) == 6);
  CHECK(order.empty());
  CHECK(kairos::gotcha_patcher::count_slots("kgt_add", original).holding_value >= 2);
}

TEST_CASE("a symbol defined nowhere is reported, and a later wrap of a real one still works") {
  using missing = kairos::gotcha<1, kairos::component_tuple<call_log>>;
  const auto status = missing::wrap<0, int(int)>("kgt_no_such_function");
  CHECK_FALSE(status.ok());
  CHECK_FALSE(status.defined);
  CHECK(status.failure.text().find("gotcha: ") == 0);
  CHECK(status.failure.text().find("kgt_no_such_function") != std::string::npos);
  missing::unwrap_all();
}

TEST_CASE("a symbol that no slot binds is reported as reaching no call") {
  using unbound = kairos::gotcha<1, kairos::component_tuple<call_log>>;
  const auto status = unbound::wrap<0, int(int)>("kgt_called_by_nobody");
  CHECK(status.defined);
  CHECK(status.slots_patched == 0);
  CHECK_FALSE(status.ok());
  CHECK(status.failure.text().find("gotcha: ") == 0);
  CHECK(status.failure.text().find("no GOT slot") != std::string::npos);
  unbound::unwrap_all();
}

namespace {
struct wait_counter {
  static inline std::atomic<int> calls{0};
  void start() { calls.fetch_add(1); }
};
}  // namespace

TEST_CASE("a versioned symbol wraps the version it names (pthread_cond_wait@GLIBC_2.3.2)") {
  using waits = kairos::gotcha<1, kairos::component_tuple<wait_counter>>;
  // Looked up before wrapping: afterwards dlvsym returns the wrapper.
  void* current = dlvsym(RTLD_DEFAULT, "pthread_cond_wait", "GLIBC_2.3.2");
  void* old = dlvsym(RTLD_DEFAULT, "pthread_cond_wait", "GLIBC_2.2.5");
  const auto status = waits::wrap<0, int(pthread_cond_t*, pthread_mutex_t*)>("pthread_cond_wait@GLIBC_2.3.2");
  REQUIRE(status.defined);
  CHECK(dlvsym(RTLD_DEFAULT, "pthread_cond_wait", "GLIBC_2.3.2") == waits::wrapper_address<0>());
  CHECK(dlvsym(RTLD_DEFAULT, "pthread_cond_wait", "GLIBC_2.2.5") == old);  // another version
  CHECK(waits::next_address<0>() == current);
  CHECK(current != old);
  CHECK(status.ok());  // libstdc++'s condition_variable binds it

  // std::condition_variable::wait calls it from libstdc++ through a patched slot. The notifier
  // starts while this thread holds the mutex, so the wait is certain to happen.
  std::mutex mutex;
  std::condition_variable ready;
  bool done = false;
  std::unique_lock lock{mutex};
  std::thread notifier{[&] {
    std::lock_guard inner{mutex};
    done = true;
    ready.notify_one();
  }};
  while (!done) ready.wait(lock);
  lock.unlock();
  notifier.join();
  waits::unwrap_all();
  CHECK(wait_counter::calls.load() >= 1);
}

TEST_CASE("as a bundle member, gotcha wraps its configured functions from start() to stop()") {
  struct member_tag;
  using member = kairos::gotcha<1, kairos::component_tuple<call_log>, member_tag>;
  member::configure<0, int(int, int)>("kgt_add");
  call_log::reset();
  kairos::component_tuple<member> region{"region"};
  CHECK_FALSE(member::is_wrapped<0>());
  region.start();
  CHECK(member::is_wrapped<0>());
  CHECK(kgt_add(1, 4) == 5);
  region.stop();
  CHECK_FALSE(member::is_wrapped<0>());
  CHECK(kgt_add(1, 5) == 6);
  CHECK(call_log::events == std::vector<std::string>{"start", "audit 1 4", "audit 5", "stop"});
}
