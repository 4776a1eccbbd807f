// A real library's hot loop for benchmarks/instrumentation/json_hot_loop.py: nlohmann_json builds
// a document of N objects, dumps it and parses it back. Built with -finstrument-functions and no
// exclusion list, every call of the library's (header) code reaches the hooks: tens of millions of
// short calls, the worst case of instrumenting template-heavy C++.
// Usage: json_workload [objects (2000)]
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
int main(int argc, char** argv) {
  const int objects = argc > 1 ? std::atoi(argv[1]) : 2000;
  nlohmann::json document = nlohmann::json::array();
  for (int i = 0; i < objects; ++i)
    document.push_back({{"id", i},
                        {"name", "object " + std::to_string(i)},
                        {"values", {i, i * 2, i * 3}},
                        {"nested", {{"flag", i % 2 == 0}, {"ratio", i / 7.0}}}});
  const auto text = document.dump();
  const auto parsed = nlohmann::json::parse(text);
  std::printf("%zu bytes, %zu objects\n", text.size(), parsed.size());
}
