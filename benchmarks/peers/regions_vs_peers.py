#!/usr/bin/env python3
"""What one region (push and pop of a named zone) costs in kairos and in its peers, whole processes,
side by side in one run.

region_driver.cpp runs COUNT regions in a loop, built (g++ -O2) once per configuration below. The
configurations run interleaved round by round (their order rotated each round):
  floor                  the empty loop
  clock pair             two std::chrono::steady_clock::now() reads: the baseline of every ratio
  kairos, no runtime     kairos_push_region + kairos_pop_region, libkairos-user.so, no kairos-run
  kairos                 the same under kairos-run --formats db (no sampler): every region a row
  tracy                  Tracy's ZoneScopedN, TracyClient.cpp built in (TRACY_ENABLE), no viewer
  caliper runtime-report CALI_MARK_BEGIN/END with CALI_CONFIG=runtime-report
  caliper event-trace    the same with CALI_CONFIG=event-trace (a .cali file written at exit)
Two figures per region:
  on the thread   the calling thread's CPU time over the loop (CLOCK_THREAD_CPUTIME_ID), per region
  process CPU     wait4's user + system of the whole process (the peer's own threads and its flush at
                  exit included) at two sizes, COUNT/2 and COUNT, the difference per extra region:
                  fixed costs (start-up, a runtime's symbolizer) cancel out
Each is printed as a median (lowest-highest) over the rounds, with its ratio to the clock pair's
figure measured the same way in the same round.

Peers come from their public source, given on the command line; one not given, or one that fails
to build, is reported as skipped with the reason. Nothing in Debian 12 gives a region API to
compare (no Tracy, Caliper or timemory packages), so every peer is built from source:
  --tracy DIR    a Tracy source tree (the folder holding public/TracyClient.cpp)
  --caliper DIR  a Caliper install prefix (include/caliper/cali.h, lib/libcaliper.so), or a source
                 tree (CMakeLists.txt), configured and built once into --peer-build (no MPI, no
                 Python, no tests, no tools; takes minutes)

Usage: benchmarks/peers/regions_vs_peers.py [build directory (default build)] [rounds (7)]
       [--regions COUNT (1000000)] [--tracy DIR] [--caliper DIR] [--peer-build DIR]
"""
import argparse
import glob
import hashlib
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from interleaved import run_measured  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DRIVER = os.path.join(ROOT, "benchmarks/peers/region_driver.cpp")
COMPILE = ["g++", "-std=c++20", "-O2", "-g", "-pthread"]


def git_commit(directory):
    out = subprocess.run(["git", "-C", directory, "rev-parse", "--short=12", "HEAD"], capture_output=True,
                         text=True, check=False)
    return out.stdout.strip() if out.returncode == 0 else "not a git checkout"


def define_value(header, name):
    """The value of `#define name value` in a header, or '?'."""
    try:
        for line in open(header):
            words = line.split()
            if len(words) >= 3 and words[0] == "#define" and words[1] == name:
                return words[2].strip('"')
    except OSError:
        pass
    return "?"


def build_kairos(build_dir, work):
    subprocess.run(["nice", "cmake", "--build", build_dir, "-j2", "--target", "kairos_run", "kairos_preload",
                    "kairos_user"], check=True, stdout=subprocess.DEVNULL)
    library_dir = os.path.join(build_dir, "plugins/runtime")
    path = os.path.join(work, "kairos_driver")
    subprocess.run([*COMPILE, "-DKAIROS_USER_API", f"-I{os.path.join(ROOT, 'plugins/runtime/include')}", DRIVER,
                    "-o", path, f"-L{library_dir}", f"-Wl,-rpath,{library_dir}", "-lkairos-user"], check=True)
    return path


def build_tracy(source, peer_build, work):
    """(program, version, reason skipped)."""
    if source is None:
        return None, None, "no Tracy source given (--tracy DIR)"
    client = os.path.join(source, "public/TracyClient.cpp")
    if not os.path.isfile(client):
        return None, None, f"{client} not found"
    common = os.path.join(source, "public/common/TracyVersion.hpp")
    text = open(common).read() if os.path.isfile(common) else ""  # constexpr int Major = 0; ...
    version = ".".join(text.split(f"{part} = ")[1].split(";")[0] if f"{part} = " in text else "?"
                       for part in ("Major", "Minor", "Patch"))
    # TracyClient.cpp takes a minute or two here: compiled once per source tree, kept in --peer-build.
    os.makedirs(peer_build, exist_ok=True)
    tree_key = hashlib.sha1(os.path.abspath(source).encode()).hexdigest()[:10]
    client_object = os.path.join(peer_build, f"TracyClient-{tree_key}.o")
    flags = [*COMPILE, "-DTRACY_ENABLE", f"-I{os.path.join(source, 'public')}"]
    out = subprocess.CompletedProcess([], 0, "", "")
    if not os.path.isfile(client_object) or os.path.getmtime(client_object) < os.path.getmtime(client):
        print(f"building {client} (a minute or two)", flush=True)
        out = subprocess.run(["nice", *flags, "-c", client, "-o", client_object], capture_output=True, text=True,
                             check=False)
    path = os.path.join(work, "tracy_driver")
    if out.returncode == 0:
        out = subprocess.run([*flags, "-DPEER_TRACY", DRIVER, client_object, "-o", path, "-ldl"], capture_output=True,
                             text=True, check=False)
    if out.returncode != 0:
        return None, None, f"TracyClient.cpp did not build: {out.stderr.strip().splitlines()[-1:]}"
    return path, f"Tracy {version} ({git_commit(source)})", None


def caliper_prefix(given, peer_build):
    """An install prefix for `given` (a prefix already, or a source tree built and installed once)."""
    if os.path.isfile(os.path.join(given, "include/caliper/cali.h")):
        return given
    if not os.path.isfile(os.path.join(given, "CMakeLists.txt")):
        raise RuntimeError(f"{given} is neither a Caliper install prefix nor a source tree")
    prefix = os.path.join(peer_build, "caliper")
    if os.path.isfile(os.path.join(prefix, "include/caliper/cali.h")):
        return prefix
    build = os.path.join(peer_build, "caliper-build")
    options = ["-DBUILD_TESTING=OFF", "-DWITH_MPI=OFF", "-DWITH_PYTHON_BINDINGS=OFF", "-DWITH_FORTRAN=OFF",
               "-DWITH_TOOLS=OFF", "-DWITH_GOTCHA=OFF", "-DWITH_KOKKOS=OFF"]
    print(f"building Caliper from {given} into {prefix} (minutes)", flush=True)
    subprocess.run(["cmake", "-S", given, "-B", build, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
                    f"-DCMAKE_INSTALL_PREFIX={prefix}", *options], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["nice", "cmake", "--build", build, "--target", "install", "-j2"], check=True,
                   stdout=subprocess.DEVNULL)
    return prefix


def build_caliper(given, peer_build, work):
    if given is None:
        return None, None, "no Caliper source or prefix given (--caliper DIR)"
    try:
        prefix = caliper_prefix(os.path.abspath(given), peer_build)
    except (RuntimeError, subprocess.CalledProcessError) as error:
        return None, None, f"Caliper did not build: {error}"
    library_dirs = [d for d in (os.path.join(prefix, "lib"), os.path.join(prefix, "lib64")) if os.path.isdir(d)]
    config = glob.glob(os.path.join(prefix, "include/caliper/caliper-config.h"))
    version = define_value(config[0], "CALIPER_VERSION") if config else "?"
    source = given if os.path.isfile(os.path.join(given, "CMakeLists.txt")) else prefix
    path = os.path.join(work, "caliper_driver")
    out = subprocess.run([*COMPILE, "-DPEER_CALIPER", f"-I{os.path.join(prefix, 'include')}", DRIVER, "-o", path,
                          *[f"-L{d}" for d in library_dirs], *[f"-Wl,-rpath,{d}" for d in library_dirs], "-lcaliper"],
                         capture_output=True, text=True, check=False)
    if out.returncode != 0:
        return None, None, f"the Caliper driver did not build: {out.stderr.strip().splitlines()[-1:]}"
    return path, f"Caliper {version} ({git_commit(source)})", None


def run(command, env, cwd):
    """(on-thread ns a region as the program measured it, the process's CPU seconds)."""
    _, cpu_seconds, output, _ = run_measured(command, env, cwd)
    words = output.split()
    return float(words[words.index("thread_ns") + 1]), cpu_seconds


def remove_outputs(work):
    """What the runs left: kairos's databases, Caliper's .cali files."""
    for name in os.listdir(work):
        if name.startswith("regions-") or name.endswith(".cali"):
            os.remove(os.path.join(work, name))


def machine():
    model = "?"
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    return f"{model}, {os.cpu_count()} CPUs, {platform.system()} {platform.release()}"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("build", nargs="?", default=os.path.join(ROOT, "build"))
    parser.add_argument("rounds", nargs="?", type=int, default=7)
    parser.add_argument("--regions", type=int, default=1_000_000)
    parser.add_argument("--tracy", help="a Tracy source tree")
    parser.add_argument("--caliper", help="a Caliper install prefix or source tree")
    parser.add_argument("--peer-build", default=os.path.join(tempfile.gettempdir(), "kairos-peers"),
                        help="where a Caliper source tree is built and installed (kept for the next run)")
    args = parser.parse_args()
    args.build = os.path.abspath(args.build)
    kairos_run = os.path.join(args.build, "plugins/runtime/kairos-run")
    sizes = (args.regions // 2, args.regions)
    with tempfile.TemporaryDirectory() as work:
        plain = os.path.join(work, "plain_driver")
        subprocess.run([*COMPILE, DRIVER, "-o", plain], check=True)
        kairos = build_kairos(args.build, work)
        tracy, tracy_version, tracy_skipped = build_tracy(args.tracy, args.peer_build, work)
        caliper, caliper_version, caliper_skipped = build_caliper(args.caliper, args.peer_build, work)
        base_env = {k: v for k, v in os.environ.items() if not k.startswith(("KAIROS_", "CALI_", "TRACY_"))}
        base_env.update({"KAIROS_SAMPLING_CPUTIME": "false", "KAIROS_OUTPUT_FORMATS": "db"})
        out = ["-o", os.path.join(work, "regions-%pid%")]
        configurations = {
            "floor": (lambda n: [plain, "--floor", str(n)], {}),
            "clock pair": (lambda n: [plain, "--clock-pairs", str(n)], {}),
            "kairos, no runtime": (lambda n: [kairos, "--regions", str(n)], {}),
            "kairos": (lambda n: [kairos_run, *out, "--formats", "db", "--", kairos, "--regions", str(n)], {}),
        }
        if tracy:
            configurations["tracy"] = (lambda n: [tracy, "--regions", str(n)], {})
        if caliper:
            for recipe in ("runtime-report", "event-trace"):
                configurations[f"caliper {recipe}"] = (lambda n: [caliper, "--regions", str(n)],
                                                       {"CALI_CONFIG": recipe})
        names = list(configurations)
        runs = [(name, n) for name in names for n in sizes]
        results = {key: [] for key in runs}
        load_before = open("/proc/loadavg").read().split()[:3]
        started = time.strftime("%Y-%m-%d %H:%M")
        for round_index in range(args.rounds):
            shift = round_index % len(runs)
            for key in runs[shift:] + runs[:shift]:
                command, settings = configurations[key[0]]
                results[key].append(run(command(key[1]), {**base_env, **settings}, work))
                remove_outputs(work)
        load_after = open("/proc/loadavg").read().split()[:3]

    def spread(values, digits=1):
        return f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"

    small, large = sizes

    def on_thread(name):
        return [thread for thread, _ in results[(name, large)]]

    def process_cpu(name):
        return [(big - little) / (large - small) * 1e9
                for (_, big), (_, little) in zip(results[(name, large)], results[(name, small)])]

    pair_thread, pair_process = on_thread("clock pair"), process_cpu("clock pair")
    print(f"{started}; {machine()}; kairos {git_commit(ROOT)}")
    for version in (tracy_version, caliper_version):
        if version:
            print(f"peer: {version}")
    print(f"{large:,} regions a run (process CPU: {small:,} to {large:,}); {args.rounds} rounds interleaved; "
          f"load average {' '.join(load_before)} before, {' '.join(load_after)} after")
    print("ns a region, median (lowest-highest); x: ratio to the clock pair's figure of the same round")
    print(f"{'configuration':<24} {'on the thread, ns':<24} {'x clock pair':<20} {'process CPU, ns':<24} "
          f"{'x clock pair':<20}")
    for name in names:
        thread, process = on_thread(name), process_cpu(name)
        baseline = name == "clock pair"
        thread_ratio = "" if baseline else spread([a / b for a, b in zip(thread, pair_thread)], 2)
        process_ratio = "" if baseline else spread([a / b for a, b in zip(process, pair_process)], 2)
        print(f"{name:<24} {spread(thread):<24} {thread_ratio:<20} {spread(process):<24} {process_ratio:<20}")
    for peer, reason in (("tracy", tracy_skipped), ("caliper", caliper_skipped)):
        if reason:
            print(f"{peer}: skipped, {reason}")


if __name__ == "__main__":
    main()
