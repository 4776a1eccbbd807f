#pragma once
// What component_tuple and component_list share: a label, the members, the lap count, and the
// forwarding of every operation to the members by the best-match rule. They differ only in
// `Switches`: always on (compiled away) or switched per member at run time.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

#include <kairos/component_traits.hpp>
#include <kairos/detail/component_set.hpp>
#include <kairos/operations.hpp>

namespace kairos::detail {

struct always_on {
  static constexpr bool is_on(std::size_t) noexcept { return true; }
};

// The readings an operation shares among its members. Always-on bundles take them up front (no
// branch per member); switched bundles take each on first use, so a list whose cached members are
// all off makes no system call for them.
template <class Caches>
struct eager_caches {
  Caches readings{};  // each cache takes its reading when constructed
  template <class Cache>
  constexpr Cache& get() {
    return std::get<Cache>(readings);
  }
};

template <class Caches>
struct lazy_caches;

template <class... Cache>
struct lazy_caches<std::tuple<Cache...>> {
  std::tuple<std::optional<Cache>...> readings;
  template <class One>
  One& get() {
    auto& reading = std::get<std::optional<One>>(readings);
    if (!reading) reading.emplace();
    return *reading;
  }
};

template <class Operation, class Members, class Switches>
constexpr auto fresh_caches() {
  if constexpr (!Operation::reads_measurement)
    return eager_caches<std::tuple<>>{};
  else if constexpr (std::is_same_v<Switches, always_on>)
    return eager_caches<cache_set_t<Members>>{};
  else
    return lazy_caches<cache_set_t<Members>>{};
}

// One member's call: members sharing a cache get the bundle's reading in place of the arguments.
template <class Operation, class Component, class Caches, class... Args>
constexpr decltype(auto) call_member(Component& component, Caches& caches, Args&... args) {
  if constexpr (Operation::reads_measurement && uses_cache<Component>)
    return invoke_best<Operation>(component, caches.template get<typename Component::cache_type>());
  else
    return invoke_best<Operation>(component, args...);
}

// An rvalue std::string (a forwarding reference deduces the plain type for rvalues only).
template <class T>
concept temporary_string = std::is_same_v<T, std::string>;

template <class Switches, class... Ts>
class basic_bundle {
 public:
  using component_types = component_set_t<Ts...>;
  static constexpr std::size_t size = std::tuple_size_v<component_types>;

  explicit constexpr basic_bundle(std::string_view label) noexcept : label_{label} {}
  // The bundle keeps a view of its label: a temporary string would dangle.
  template <temporary_string String>
  basic_bundle(String&&) = delete;

  template <class... Args>
  constexpr void start(Args&&... args) {
    apply<op::start>(args...);
  }
  template <class... Args>
  constexpr void stop(Args&&... args) {
    apply<op::stop>(args...);
    ++laps_;
  }
  template <class... Args>
  constexpr void sample(Args&&... args) {
    apply<op::sample>(args...);
  }
  template <class... Args>
  constexpr void audit(Args&&... args) {
    apply<op::audit>(args...);
  }
  template <class... Args>
  constexpr void mark(Args&&... args) {
    apply<op::mark>(args...);
  }
  template <class... Args>
  constexpr void store(Args&&... args) {
    apply<op::store>(args...);
  }

  // The instantaneous readings of the members that have `record()`, as a tuple.
  template <class... Args>
  constexpr auto record(Args&&... args) {
    return collect<op::record>(args...);
  }
  // The results of the members that have `get()`, as a tuple (of optionals for switched members).
  constexpr auto get() { return collect<op::get>(); }
  template <class Component>
  constexpr decltype(auto) get() {
    static_assert(reaches<op::get, Component>, "this component has no get()");
    return component<Component>().get();
  }

  template <class Component>
  constexpr Component& component() noexcept {
    return std::get<Component>(members_);
  }
  template <class Component>
  constexpr const Component& component() const noexcept {
    return std::get<Component>(members_);
  }
  constexpr component_types& components() noexcept { return members_; }

  constexpr std::string_view label() const noexcept { return label_; }
  // Completed start/stop phases.
  constexpr std::size_t laps() const noexcept { return laps_; }

 protected:
  [[no_unique_address]] Switches switches_{};

 private:
  template <class Operation, class... Args>
  constexpr void apply(Args&... args) {
    auto caches = fresh_caches<Operation, component_types, Switches>();
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      ((switches_.is_on(I) ? void(call_member<Operation>(std::get<I>(members_), caches, args...)) : void()), ...);
    }
    (std::make_index_sequence<size>{});
  }

  template <class Operation, std::size_t I, class Caches, class... Args>
  constexpr auto piece(Caches& caches, Args&... args) {
    using member = std::tuple_element_t<I, component_types>;
    using result = invoke_result_t<Operation, member, Args...>;
    if constexpr (!reaches<Operation, member, Args...> || std::is_void_v<result>) {
      return std::tuple<>{};
    } else if constexpr (std::is_same_v<Switches, always_on>) {
      return std::tuple<std::decay_t<result>>{call_member<Operation>(std::get<I>(members_), caches, args...)};
    } else {
      using optional = std::optional<std::decay_t<result>>;
      return std::tuple<optional>{
          switches_.is_on(I) ? optional{call_member<Operation>(std::get<I>(members_), caches, args...)} : std::nullopt};
    }
  }

  template <class Operation, class... Args>
  constexpr auto collect(Args&... args) {
    auto caches = fresh_caches<Operation, component_types, Switches>();
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      // Braced initialization evaluates the members in declaration order.
      std::tuple<decltype(piece<Operation, I>(caches, args...))...> pieces{piece<Operation, I>(caches, args...)...};
      return std::apply([](auto&... part) { return std::tuple_cat(std::move(part)...); }, pieces);
    }
    (std::make_index_sequence<size>{});
  }

  std::string_view label_;
  component_types members_{};
  std::size_t laps_ = 0;
};

}  // namespace kairos::detail
