#pragma once
// stored<Bundle>: a bundle that records every start/stop phase into the calling thread's call
// graph: push on start, pop on stop, the phase's values added to the node's statistics.
// Plain bundles (component_tuple, component_list) touch no global state; this one does, by choice.
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string_view>
#include <tuple>
#include <utility>

#include <kairos/storage/call_graph.hpp>
#include <kairos/storage/component_registry.hpp>
#include <kairos/storage/thread_graphs.hpp>

namespace kairos {

namespace detail {
inline std::atomic<storage_mode> default_storage_mode{storage_mode::tree};
}

// The mode of stored bundles that do not choose one. Set it before recording starts.
inline void set_default_storage_mode(storage_mode mode) noexcept {
  detail::default_storage_mode.store(mode, std::memory_order_relaxed);
}
inline storage_mode default_storage_mode() noexcept {
  return detail::default_storage_mode.load(std::memory_order_relaxed);
}

struct storage_options {
  storage_mode mode = default_storage_mode();
  const char* file = nullptr;  // where the region is declared (KAIROS_REGION fills these)
  std::uint32_t line = 0;
};

template <class Bundle>
class stored : public Bundle {
  using members = typename Bundle::component_types;

 public:
  explicit stored(std::string_view label, storage_options options = {}) : Bundle{label}, options_{options} {}
  stored(std::string_view label, std::initializer_list<std::string_view> names, storage_options options = {}) requires
      std::is_constructible_v<Bundle, std::string_view, std::initializer_list<std::string_view>>
      : Bundle{label, names}, options_{options} {}

  template <class... Args>
  void start(Args&&... args) {
    graph_ = &this_thread_graph();
    node_ = graph_->push(this->label(), options_.mode, options_.file, options_.line);
    Bundle::start(args...);
  }

  template <class... Args>
  void stop(Args&&... args) {
    Bundle::stop(args...);
    if (graph_ == nullptr) return;  // stop without start: nothing to record
    record_phase();
    graph_->pop(node_);
    graph_ = nullptr;
  }

  storage_mode mode() const noexcept { return options_.mode; }

 private:
  static constexpr std::size_t member_count = std::tuple_size_v<members>;

  template <std::size_t I>
  static constexpr std::size_t values_of() {
    using member = std::tuple_element_t<I, members>;
    if constexpr (recordable<member>)
      return value_count_of<member>;
    else
      return 0;
  }
  // Where member I's values start in last_.
  template <std::size_t I>
  static constexpr std::size_t offset_of() {
    return []<std::size_t... J>(std::index_sequence<J...>) { return (std::size_t{0} + ... + values_of<J>()); }
    (std::make_index_sequence<I>{});
  }
  static constexpr std::size_t value_total = offset_of<member_count>();

  // Components accumulate over laps; a node receives what this phase added.
  void record_phase() {
    [&]<std::size_t... I>(std::index_sequence<I...>) { (record_member<I>(), ...); }
    (std::make_index_sequence<member_count>{});
  }

  template <std::size_t I>
  void record_member() {
    using member = std::tuple_element_t<I, members>;
    if constexpr (recordable<member>) {
      if (!this->switches_.is_on(I)) return;
      const auto id = component_id<member>();
      const auto result = std::get<I>(this->components()).get();
      if constexpr (value_count_of<member> == 1 && std::is_arithmetic_v<std::decay_t<decltype(result)>>) {
        record_value(id, 0, offset_of<I>(), static_cast<double>(result));
      } else {
        for (std::size_t k = 0; k < result.size(); ++k)
          record_value(id, static_cast<std::uint32_t>(k), offset_of<I>() + k, static_cast<double>(result[k]));
      }
    }
  }

  void record_value(std::uint32_t component, std::uint32_t value_index, std::size_t offset, double total) {
    graph_->record(node_, component, value_index, total - last_[offset]);
    last_[offset] = total;
  }

  storage_options options_;
  call_graph* graph_ = nullptr;
  std::uint32_t node_ = 0;
  std::array<double, value_total> last_{};
};

}  // namespace kairos
