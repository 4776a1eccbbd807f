// kairos._native: the database plugin's commands, outputs and merger for the Python package. Every
// byte a command or an output writes goes through a Python file object (sys.stdout.buffer, an open
// file, io.BytesIO), in 64 KiB chunks, so the outputs stream as they do in C++.
#include <array>
#include <cstdint>
#include <exception>
#include <map>
#include <optional>
#include <ostream>
#include <sstream>
#include <streambuf>
#include <string>
#include <unordered_map>
#include <vector>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <kairos/plugins/database/commands.hpp>
#include <kairos/plugins/database/formats.hpp>
#include <kairos/plugins/database/merge.hpp>
#include <kairos/plugins/database/region_block.hpp>
#include <kairos/plugins/database/schema.hpp>

namespace py = pybind11;
namespace db = kairos::database;

namespace {

// A streambuf whose bytes go to a binary Python file object's write(), then flush() (so that
// kairos-merge's progress shows as it goes). The GIL is held throughout: it is only used inside
// calls from Python.
class python_file_buffer : public std::streambuf {
 public:
  explicit python_file_buffer(py::object file) : write_{file.attr("write")}, flush_{file.attr("flush")} {
    setp(buffer_.data(), buffer_.data() + buffer_.size());
  }
  ~python_file_buffer() override { sync(); }

 protected:
  int_type overflow(int_type character) override {
    if (sync() != 0) return traits_type::eof();
    if (!traits_type::eq_int_type(character, traits_type::eof())) sputc(traits_type::to_char_type(character));
    return traits_type::not_eof(character);
  }

  int sync() override {
    const auto size = pptr() - pbase();
    if (size == 0) return 0;
    setp(buffer_.data(), buffer_.data() + buffer_.size());
    try {
      write_(py::bytes(buffer_.data(), static_cast<std::size_t>(size)));
      flush_();
    } catch (const py::error_already_set&) {
      return -1;  // the stream goes bad; the command then reports that it could not write
    }
    return 0;
  }

 private:
  py::object write_, flush_;
  std::array<char, 64 * 1024> buffer_;
};

int run_report(std::vector<std::string> databases, std::string format, std::string output, std::string window,
               bool compare_windows, std::optional<std::int64_t> rank, py::object out, py::object errors) {
  python_file_buffer out_buffer{std::move(out)}, errors_buffer{std::move(errors)};
  std::ostream out_stream{&out_buffer}, errors_stream{&errors_buffer};
  const int status = db::run_report(
      {std::move(databases), std::move(format), std::move(output), std::move(window), compare_windows, rank},
      out_stream, errors_stream);
  out_stream.flush();
  errors_stream.flush();
  return status;
}

int run_merge(std::string output, std::vector<std::string> inputs, bool keep_going, bool several_launches,
              py::object errors, bool terminal) {
  python_file_buffer errors_buffer{std::move(errors)};
  std::ostream errors_stream{&errors_buffer};
  const int status =
      db::run_merge({std::move(output), std::move(inputs), keep_going, several_launches}, errors_stream, terminal);
  errors_stream.flush();
  return status;
}

// The `regions` view's rows, in its order (its columns: name, thread, start_ns, end_ns,
// duration_ns, depth, window, clipped, kind, process, rank), a few blocks a call so memory stays
// bounded. Decoded here, as kairos's outputs decode them: through SQLite every field is a substr and
// a CAST (a million regions into Python: 4.2 s through the view, 0.5-0.66 s this way).
class region_rows {
 public:
  explicit region_rows(const std::string& path)
      : profile_{db::open_profile(path)},
        blocks_{profile_, "SELECT " + std::string{db::region_block_columns} + " FROM region_block ORDER BY id"},
        names_{profile_, "SELECT value FROM string WHERE id = ?"} {
    auto threads = profile_.prepare(
        "SELECT thread.id, thread.process, process.rank FROM thread LEFT JOIN process ON process.id = thread.process");
    while (threads.step())
      owners_.emplace(threads.integer(0),
                      std::pair<py::object, py::object>{
                          py::int_(threads.integer(1)),
                          threads.is_null(2) ? py::object{py::none()} : py::object{py::int_(threads.integer(2))}});
    // An annotation's regions (OpenMP, NVTX, Kokkos) carry its kind, by name and process.
    auto kinds = profile_.prepare("SELECT process, name, kind FROM region_kind");
    while (kinds.step())
      kinds_.emplace(std::pair{kinds.integer(0), kinds.integer(1)}, py::str(std::string{kinds.text(2)}));
  }

  // The rows of up to `blocks` more blocks, as tuples; an empty list once every block is read.
  py::list next(std::size_t blocks) {
    py::list rows;
    const py::str region_kind{"region"}, function_kind{"function"};
    for (std::size_t read = 0; read < blocks && !finished_; ++read) {
      if (!blocks_.step()) {
        finished_ = true;  // a step after the last would start the query again
        break;
      }
      const auto block = db::stored_block(blocks_);
      const auto owner = owners_.find(block.thread);  // LEFT JOIN: none when the thread has no row
      const py::object process = owner == owners_.end() ? py::none() : owner->second.first;
      const py::object rank = owner == owners_.end() ? py::none() : owner->second.second;
      const auto process_id = owner == owners_.end() ? 0 : process.cast<std::int64_t>();
      const py::int_ thread{block.thread};
      block.decode([&](const db::region_fields& row) {
        const auto& name = name_of(row.name);
        if (name.is_none()) return;  // the view's JOIN with string
        rows.append(py::make_tuple(
            name, thread, row.start_ns, row.end_ns, row.end_ns - row.start_ns, row.depth, row.window, row.clipped,
            row.frame != 0 ? py::object{function_kind} : kind_of(process_id, row.name, region_kind), process, rank));
      });
    }
    return rows;
  }

 private:
  py::object kind_of(std::int64_t process, std::int64_t name, const py::str& otherwise) const {
    if (kinds_.empty()) return otherwise;
    const auto found = kinds_.find({process, name});
    return found == kinds_.end() ? py::object{otherwise} : py::object{found->second};
  }
  const py::object& name_of(std::int64_t id) {
    auto found = strings_.find(id);
    if (found != strings_.end()) return found->second;
    names_.bind(1, id);
    py::object name = names_.step() ? py::object{py::str(std::string{names_.text(0)})} : py::object{py::none()};
    names_.reset();
    return strings_.emplace(id, std::move(name)).first->second;
  }

  db::connection profile_;
  db::statement blocks_, names_;
  std::unordered_map<std::int64_t, std::pair<py::object, py::object>> owners_;  // thread -> (process, rank)
  std::unordered_map<std::int64_t, py::object> strings_;
  std::map<std::pair<std::int64_t, std::int64_t>, py::object> kinds_;  // (process, name) -> kind
  bool finished_ = false;
};

}  // namespace

PYBIND11_MODULE(_native, module) {
  module.doc() = "kairos's database plugin (C++): the report and merge commands, the outputs, the merger";
  module.attr("schema_version") = db::schema_version;
  // A database_error's text carries no prefix; what a Python user reads is a kairos line.
  static py::exception<db::database_error> database_error_type(module, "DatabaseError");
  py::register_exception_translator([](std::exception_ptr thrown) {
    try {
      if (thrown) std::rethrow_exception(thrown);
    } catch (const db::database_error& error) {
      database_error_type(("[kairos] " + std::string{error.what()}).c_str());
    }
  });

  module.def(
      "check_profile", [](const std::string& path) { db::open_profile(path); }, py::arg("path"),
      "Raises DatabaseError naming the file when it is not a kairos profile of this schema version.");
  {
    py::list formats;  // the one table of output formats (formats.hpp), as the tools read it
    for (const auto& row : db::formats) {
      py::dict entry;
      entry["name"] = std::string{row.name};
      entry["extension"] = std::string{row.extension};
      entry["description"] = std::string{row.description};
      entry["at_exit"] = row.at_exit;
      entry["from_database"] = row.from_database;
      entry["several_databases"] = row.several_databases;
      formats.append(entry);
    }
    module.attr("formats") = formats;
  }
  module.def("run_report", &run_report, py::arg("databases"), py::arg("format"), py::arg("output"), py::arg("window"),
             py::arg("compare_windows"), py::arg("rank"), py::arg("out"), py::arg("errors"),
             "kairos-report's work: the output to `out` (or the file `output`), problems to `errors`; "
             "returns the exit status.");
  module.def("run_merge", &run_merge, py::arg("output"), py::arg("inputs"), py::arg("keep_going"),
             py::arg("several_launches"), py::arg("errors"), py::arg("terminal"),
             "kairos-merge's work: progress and problems to `errors`; returns the exit status.");

  py::class_<region_rows>(module, "RegionRows", "The regions view's rows, decoded from their blocks in C++.")
      .def(py::init<const std::string&>(), py::arg("path"))
      .def("next", &region_rows::next, py::arg("blocks"),
           "The rows of up to `blocks` more blocks, as tuples in the view's column order; [] at the end.");

  py::class_<db::merger>(module, "Merger", "Profile databases merged one at a time into a new one (docs/merge.md).")
      .def(py::init<const std::string&>(), py::arg("output"))
      .def(
          "add",
          [](db::merger& merger, const std::string& input) {
            const auto added = merger.add(input);
            return py::make_tuple(added.processes, added.samples);
          },
          py::arg("input"), "Merges one input; returns (processes, samples) it added.")
      .def("finish", &db::merger::finish, "Syncs the merged database to disk.")
      .def_property_readonly("processes", &db::merger::processes)
      .def_property_readonly("samples", &db::merger::samples);
}
