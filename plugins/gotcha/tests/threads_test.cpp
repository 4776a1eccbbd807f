// strlen (an IFUNC in glibc) and malloc wrapped and counted while four threads call them.
#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include <kairos/component_tuple.hpp>
#include <kairos/plugins/gotcha.hpp>

namespace {

struct call_counter {
  static inline std::atomic<long> calls{0};
  void start() { calls.fetch_add(1, std::memory_order_relaxed); }
};

// The counter allocates on every call: that malloc runs inside kairos and must go straight through.
struct allocating_member {
  void start() { std::free(std::malloc(32)); }
};

using counted = kairos::gotcha<2, kairos::component_tuple<call_counter, allocating_member>>;

constexpr int thread_count = 4;
constexpr int calls_per_thread = 20000;

// Not inlined, and the compiler is told nothing about these names (-fno-builtin), so each is a
// real call through this program's slot.
[[gnu::noinline]] std::size_t measure(const char* text) { return std::strlen(text); }
[[gnu::noinline]] void* allocate(std::size_t bytes) { return std::malloc(bytes); }

}  // namespace

TEST_CASE("strlen resolves to glibc's chosen implementation, not its IFUNC resolver") {
  REQUIRE(counted::wrap<0, std::size_t(const char*)>("strlen").ok());
  void* implementation = counted::next_address<0>();
  counted::unwrap_all();
  // dlsym runs IFUNC resolvers: the original is the implementation a slot would be bound to.
  CHECK(implementation == dlsym(RTLD_DEFAULT, "strlen"));
  CHECK(reinterpret_cast<std::size_t (*)(const char*)>(implementation)("kairos") == 6);
}

TEST_CASE("strlen and malloc wrapped and counted across four threads without deadlock") {
  call_counter::calls = 0;
  REQUIRE(counted::wrap<0, std::size_t(const char*)>("strlen").ok());
  REQUIRE(counted::wrap<1, void*(std::size_t)>("malloc").ok());

  std::atomic<long> wrong_lengths{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < thread_count; ++t)
    threads.emplace_back([&, t] {
      char text[32];
      for (int i = 0; i < calls_per_thread; ++i) {
        const int length = 1 + (i + t) % 30;
        std::memset(text, 'x', length);
        text[length] = '\0';
        if (measure(text) != static_cast<std::size_t>(length)) wrong_lengths.fetch_add(1);
        void* block = allocate(static_cast<std::size_t>(length));
        std::free(block);
      }
    });
  for (auto& thread : threads) thread.join();
  const long counted_calls = call_counter::calls.load();
  counted::unwrap_all();

  CHECK(wrong_lengths.load() == 0);
  // Every call of ours is counted; the C++ runtime's own mallocs (thread start-up) add a few more.
  CHECK(counted_calls >= 2L * thread_count * calls_per_thread);
  CHECK(counted_calls < 2L * thread_count * calls_per_thread + 10000);
  call_counter::calls = 0;
  CHECK(measure("after") == 5);
  std::free(allocate(8));
  CHECK(call_counter::calls.load() == 0);
}
