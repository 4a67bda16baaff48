#!/usr/bin/env bash
# tools/gpu-check.sh: the one prepared device check of issue 15 (docs/gpu.md).
#
# On the GPU machine (no network, no apt; CMake, ninja, nvcc and python3 with
# the CUDA torch wheel, whose LibTorch Kestrel builds against), from the
# repository root:
#   1. facts: GPU, driver, CPU, memory, torch/CUDA versions, compilers
#   2. unpack the carried .deb files (tools/gpu/fetch-debs.sh) into a prefix
#   3. configure + build the torch-only build (cmake/torch_only.cmake) against
#      the wheel's LibTorch; Kestrel's own warnings are counted, not fatal
#   4. the torch-only audit (no excluded package's header or library used)
#   5. bench/train_throughput's train_step_bench: n/s/m x fp32/amp
#   6. tools/gpu/reference_throughput.py: the same in PyTorch eager
#   7. the side-by-side table (Kestrel / PyTorch images/s, device memory)
#   8. the travelling trainer (docs/gpu.md): configure + build
#      bench/train_throughput's travel_trainer in its own folder with
#      KESTREL_TRAVEL_TRAINER=ON (the trainer's modules against the carried
#      OpenCV core/imgproc, libjpeg, libpng, SQLite, libpq, CURL, pugixml),
#      its audit, then end to end on the device: a synthetic dataset imported
#      into a fresh home, `train` for 4 epochs stopped by SIGTERM after epoch
#      3, then resume=last.ckpt for the last epoch; images/s and mAP from its
#      output. After the benchmarks, so a failure here costs them nothing.
# Every step's exit status, seconds and output go to the log; a failed step
# never stops the next one (a step that needs a failed one is "skipped").
# Written under $OUT (at most 7 files, none in folders): summary.json,
# log.txt, facts.txt, kestrel.jsonl, reference.jsonl, table.txt, e2e.txt.
#
# Environment (defaults are the device run's):
#   OUT                    where the figures go (default ./out/gpu-check)
#   GPU_CHECK_DEVICE       0 (cpu for a dry run here)
#   GPU_CHECK_MODELS       n,s,m      GPU_CHECK_PRECISIONS  fp32,amp
#   GPU_CHECK_IMGSZ        640        GPU_CHECK_BATCH       64
#   GPU_CHECK_WARMUP       3          GPU_CHECK_ITERS       10
#   GPU_CHECK_BUILD        /tmp/kestrel-gpu-build (kept between calls on a warm machine)
#   GPU_CHECK_PREFIX       /tmp/kestrel-gpu-prefix (where the .debs are unpacked)
#   GPU_CHECK_DEBS         .gpu/debs
#   GPU_CHECK_PYTHON       python3 (the one with torch)
#   GPU_CHECK_TORCH_PREFIX the CMake prefix of LibTorch (default: torch.utils.cmake_prefix_path)
#   GPU_CHECK_JOBS         nproc
#   GPU_CHECK_WRAP         a command prefix for the build steps and the e2e step
#                          (here: "flock /tmp/kestrel-build.lock", BUILD-PROTOCOL)
#   GPU_CHECK_TRAVEL_BUILD /tmp/kestrel-gpu-travel (step 8's build folder)
#   GPU_CHECK_TRAINER      an already built travel_trainer for step 8 (skips its build)
#   GPU_CHECK_E2E_IMGSZ    320   GPU_CHECK_E2E_BATCH 32   GPU_CHECK_E2E_IMAGES 256
#   GPU_CHECK_PARTS        bench,travel: steps 3-7 (bench) and 8 (travel); "travel"
#                          alone is the second call on a warm machine (docs/gpu.md)
#   GPU_CHECK_DEADLINE_S   540: a step that would start later than this many
#                          seconds after the script began is skipped (the
#                          run tool's limit is 600 s a command)
set -u
cd "$(dirname "$0")/.." || exit 1
ROOT=$PWD
OUT=${OUT:-$ROOT/out/gpu-check}
DEVICE=${GPU_CHECK_DEVICE:-0}
MODELS=${GPU_CHECK_MODELS:-n,s,m}
PRECISIONS=${GPU_CHECK_PRECISIONS:-fp32,amp}
IMGSZ=${GPU_CHECK_IMGSZ:-640}
BATCH=${GPU_CHECK_BATCH:-64}
WARMUP=${GPU_CHECK_WARMUP:-3}
ITERS=${GPU_CHECK_ITERS:-10}
BUILD=${GPU_CHECK_BUILD:-/tmp/kestrel-gpu-build}
TRAVEL_BUILD=${GPU_CHECK_TRAVEL_BUILD:-/tmp/kestrel-gpu-travel}
PREFIX=${GPU_CHECK_PREFIX:-/tmp/kestrel-gpu-prefix}
DEBS=${GPU_CHECK_DEBS:-.gpu/debs}
PY=${GPU_CHECK_PYTHON:-python3}
JOBS=${GPU_CHECK_JOBS:-$(nproc)}
WRAP=${GPU_CHECK_WRAP:-}
E2E_IMGSZ=${GPU_CHECK_E2E_IMGSZ:-320}
E2E_BATCH=${GPU_CHECK_E2E_BATCH:-32}
E2E_IMAGES=${GPU_CHECK_E2E_IMAGES:-256}
DEADLINE=${GPU_CHECK_DEADLINE_S:-540}
PARTS=${GPU_CHECK_PARTS:-bench,travel}
PART=common # the part the next steps belong to: common, bench (3-7) or travel (8)
START=$(date +%s)

mkdir -p "$OUT"
LOG=$OUT/log.txt
: >"$LOG"
STEPS=$OUT/.steps.tsv # folded into summary.json, then removed
: >"$STEPS"
declare -A RC

log() { echo "$*" | tee -a "$LOG"; }

# step NAME TIMEOUT_S CMD...: runs CMD with its output in the log, records
# rc and seconds; skipped when a needed step failed (NEEDS) or past the deadline.
NEEDS=""
step() {
  local name=$1 limit=$2
  shift 2
  local now
  now=$(($(date +%s) - START))
  if [[ $PART != common && ",$PARTS," != *",$PART,"* ]]; then
    RC[$name]=skipped
    printf '%s\tskipped\t0\tnot asked (GPU_CHECK_PARTS=%s)\n' "$name" "$PARTS" >>"$STEPS"
    log "== $name: skipped (part $PART not in GPU_CHECK_PARTS=$PARTS)"
    return
  fi
  for n in $NEEDS; do
    if [[ "${RC[$n]:-x}" != 0 ]]; then
      RC[$name]=skipped
      printf '%s\tskipped\t0\tneeds %s\n' "$name" "$n" >>"$STEPS"
      log "== $name: skipped (needs $n, which did not succeed)"
      return
    fi
  done
  if ((now + 5 > DEADLINE)); then
    RC[$name]=skipped
    printf '%s\tskipped\t0\tpast the deadline (%ss)\n' "$name" "$DEADLINE" >>"$STEPS"
    log "== $name: skipped (at ${now}s, past the ${DEADLINE}s deadline)"
    return
  fi
  if ((now + limit > DEADLINE)); then limit=$((DEADLINE - now)); fi
  local what="$*"
  what=${what//$'\n'/ }
  ((${#what} > 240)) && what="${what:0:240}..."
  log "== $name (at ${now}s, limit ${limit}s): $what"
  local t0
  t0=$(date +%s)
  timeout --kill-after=10 "$limit" "$@" >>"$LOG" 2>&1
  local rc=$?
  local secs
  secs=$(($(date +%s) - t0))
  RC[$name]=$rc
  local note=""
  ((rc == 124 || rc == 137)) && note="timed out after ${limit}s"
  printf '%s\t%s\t%s\t%s\n' "$name" "$rc" "$secs" "$note" >>"$STEPS"
  log "== $name: exit $rc in ${secs}s ${note}"
}

# ---- 1. facts
facts() {
  echo "date: $(date -u +%FT%TZ)"
  echo "uname: $(uname -a)"
  echo "cpus: $(nproc)"
  grep -m1 'model name' /proc/cpuinfo || true
  grep -m1 MemTotal /proc/meminfo || true
  [[ -f /etc/os-release ]] && grep PRETTY_NAME /etc/os-release
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv
  else
    echo "nvidia-smi: not found"
  fi
  command -v nvcc >/dev/null && nvcc --version | tail -2
  cmake --version | head -1
  ninja --version 2>/dev/null | sed 's/^/ninja /'
  c++ --version 2>/dev/null | head -1 || echo "c++: not found"
  "$PY" - <<'EOF'
import torch
print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version())
print("cuda available", torch.cuda.is_available(), "devices", torch.cuda.device_count())
if torch.cuda.is_available():
    p = torch.cuda.get_device_properties(0)
    print("device0", p.name, "capability %d.%d" % (p.major, p.minor), "memory %.1f GiB" % (p.total_memory / 2**30),
          "multiprocessors", p.multi_processor_count)
print("cmake_prefix_path", torch.utils.cmake_prefix_path)
print("cxx11 abi", torch._C._GLIBCXX_USE_CXX11_ABI)
EOF
}
log "gpu-check: device=$DEVICE models=$MODELS precisions=$PRECISIONS imgsz=$IMGSZ batch=$BATCH warmup=$WARMUP iterations=$ITERS"
step facts 60 bash -c "$(declare -f facts); PY='$PY' facts | tee '$OUT/facts.txt'"

TORCH_PREFIX=${GPU_CHECK_TORCH_PREFIX:-$("$PY" -c 'import torch; print(torch.utils.cmake_prefix_path)' 2>/dev/null)}

# ---- 2. carried packages
unpack() {
  shopt -s nullglob
  local debs=("$DEBS"/*.deb)
  if ((${#debs[@]} == 0)); then
    echo "no .deb files in $DEBS (tools/gpu/fetch-debs.sh): using the machine's own packages"
    return 0
  fi
  mkdir -p "$PREFIX"
  for f in "${debs[@]}"; do
    if command -v dpkg >/dev/null; then
      dpkg -x "$f" "$PREFIX" || return 1
    else # no dpkg: a .deb is an ar archive holding data.tar.*
      local tmp
      tmp=$(mktemp -d)
      (cd "$tmp" && ar x "$OLDPWD/$f" && tar -xf data.tar.* -C "$PREFIX") || return 1
      rm -rf "$tmp"
    fi
  done
  echo "unpacked ${#debs[@]} packages into $PREFIX ($(du -sh "$PREFIX" | cut -f1))"
}
step unpack 60 bash -c "$(declare -f unpack); DEBS='$DEBS' PREFIX='$PREFIX' unpack"

# ---- 3. configure + build (torch-only)
PART=bench
# What both builds (this one and the travelling trainer's, step 8) are given.
COMMON_ARGS=(-G Ninja -DKESTREL_TORCH_ONLY=ON -DKESTREL_WERROR=OFF -DCMAKE_BUILD_TYPE=Release)
PREFIXES="$TORCH_PREFIX"
if [[ -d "$PREFIX/usr" ]]; then
  PREFIXES="$PREFIXES;$PREFIX/usr"
  # Debian keeps OpenSSL's configuration.h/opensslconf.h (and jconfig.h) in the multiarch folder.
  COMMON_ARGS+=(-DOPENSSL_ROOT_DIR="$PREFIX/usr" -DCMAKE_CXX_FLAGS="-isystem $PREFIX/usr/include/x86_64-linux-gnu")
fi
COMMON_ARGS+=(-DCMAKE_PREFIX_PATH="$PREFIXES")
if command -v nvcc >/dev/null && [[ "$DEVICE" != cpu ]]; then
  # Hopper (H100/H200): the wheel's Caffe2 CMake files ask for the CUDA toolkit and an arch list.
  COMMON_ARGS+=(-DCMAKE_CUDA_ARCHITECTURES=90 -DTORCH_CUDA_ARCH_LIST=9.0 -DCMAKE_CUDA_COMPILER="$(command -v nvcc)")
fi
NEEDS=""
step configure 120 $WRAP cmake -S "$ROOT" -B "$BUILD" "${COMMON_ARGS[@]}"
NEEDS="configure"
step build 420 $WRAP cmake --build "$BUILD" --target train_step_bench -j "$JOBS"
# Kestrel's own warnings under this LibTorch (the build is not -Werror, so one
# warning does not cost the run): counted from the log of this build only.
WARNINGS=$(sed -n '/^== build (/,/^== build: exit/p' "$LOG" | grep -E "^($ROOT/)?(src|bench)/[^:]*:[0-9]+:[0-9]+: warning:" | sort -u | wc -l)
log "Kestrel warnings in the build: $WARNINGS"

# ---- 4. audit
NEEDS="build"
step audit 60 "$ROOT/tools/gpu/audit-torch-only.sh" "$BUILD" "$BUILD/bench/train_throughput/train_step_bench"

# The carried packages' headers must come from the prefix: one found in the
# machine's /usr/include instead would hide a package missing from the carry.
# The carried packages' headers and libraries must come from the prefix: one
# found in the machine's /usr instead would hide a package missing from the carry.
CARRIED_HEADERS='(openssl|spdlog|fmt|yaml-cpp|nlohmann|opencv4|postgresql|curl)/|(sqlite3|sqlite3ext|pugixml|pugiconfig|jpeglib|jconfig|jmorecfg|png|pngconf|pnglibconf|zlib|zconf)\.h'
CARRIED_LIBS='lib(ssl|crypto|spdlog|fmt|yaml-cpp|opencv_[a-z]+|sqlite3|pq|curl|pugixml|jpeg|png16|png|z)\.so'
prefix_only() {
  local build=$1 used
  used=$(ninja -C "$build" -t deps | grep -E "^ +/usr/include/(x86_64-linux-gnu/)?($CARRIED_HEADERS)" | sort -u)
  used+=$(grep -ohE "(^|[ =])/usr/lib/x86_64-linux-gnu/$CARRIED_LIBS" "$build/build.ninja" | sort -u)
  if [[ -n "$used" ]]; then
    echo "carried packages' headers or libraries taken from /usr, not from $PREFIX:"
    echo "$used" | head -20
    return 1
  fi
  echo "every carried package's header and library in $build came from $PREFIX"
}
if [[ -d "$PREFIX/usr" ]]; then
  NEEDS="build"
  step prefix_headers 30 bash -c "$(declare -f prefix_only); CARRIED_HEADERS='$CARRIED_HEADERS' \
    CARRIED_LIBS='$CARRIED_LIBS' PREFIX='$PREFIX' prefix_only '$BUILD'"
fi

# ---- 5-6. the two benchmarks, nvidia-smi sampled in the background
smi_start() {
  SMI_PID=""
  if command -v nvidia-smi >/dev/null && [[ "$DEVICE" != cpu ]]; then
    nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader,nounits -lms 250 >"$1" 2>/dev/null &
    SMI_PID=$!
  fi
}
smi_stop() { [[ -n "$SMI_PID" ]] && kill "$SMI_PID" 2>/dev/null && wait "$SMI_PID" 2>/dev/null; return 0; }
# 60 s + 30 s per model x precision (each a child process with its own CUDA context).
BENCH_LIMIT=$((60 + 30 * $(tr ',' '\n' <<<"$MODELS" | wc -l) * $(tr ',' '\n' <<<"$PRECISIONS" | wc -l)))
NEEDS="build"
smi_start "$OUT/.smi-kestrel.csv"
step kestrel_bench "$BENCH_LIMIT" bash -c "'$BUILD/bench/train_throughput/train_step_bench' models=$MODELS \
  precisions=$PRECISIONS device=$DEVICE imgsz=$IMGSZ batch=$BATCH iterations=$ITERS warmup=$WARMUP threads=$(nproc) \
  > '$OUT/kestrel.jsonl'"
smi_stop
NEEDS=""
smi_start "$OUT/.smi-reference.csv"
step reference_bench "$BENCH_LIMIT" bash -c "PYTHONUNBUFFERED=1 '$PY' '$ROOT/tools/gpu/reference_throughput.py' \
  --models $MODELS --precisions $PRECISIONS --device $DEVICE --imgsz $IMGSZ --batch $BATCH --iterations $ITERS \
  --warmup $WARMUP --threads $(nproc) > '$OUT/reference.jsonl'"
smi_stop

# ---- 7. table
step table 30 "$PY" "$ROOT/tools/gpu/compare_throughput.py" --kestrel "$OUT/kestrel.jsonl" \
  --reference "$OUT/reference.jsonl" --smi-kestrel "$OUT/.smi-kestrel.csv" --smi-reference "$OUT/.smi-reference.csv" \
  --table "$OUT/table.txt" --json "$OUT/.table.json"
[[ -f "$OUT/table.txt" ]] && cat "$OUT/table.txt" | tee -a "$LOG" >/dev/null

PART=travel
# ---- 8. the travelling trainer: its own build folder, after the figures
# above (a trainer TU that LibTorch 2.x refuses must not cost them), then end
# to end: synth, import, `train` 4 epochs stopped by SIGTERM after epoch 3,
# resume=last.ckpt for the last one.
TRAVEL_CMAKE_ARGS=(-S "$ROOT" -B "$TRAVEL_BUILD" "${COMMON_ARGS[@]}" -DKESTREL_TRAVEL_TRAINER=ON)
if [[ -d "$PREFIX" ]]; then
  # The carried libraries' own dependencies (libpq's Kerberos, OpenCV's BLAS
  # in its alternatives folder) are found there, at link time and at run time.
  PREFIX_LIBDIRS=$(find "$PREFIX" -name '*.so*' -printf '%h\n' | sort -u | paste -sd:)
  TRAVEL_CMAKE_ARGS+=(-DCMAKE_EXE_LINKER_FLAGS="-Wl,-rpath-link,$PREFIX_LIBDIRS")
fi
TRAINER=${GPU_CHECK_TRAINER:-$TRAVEL_BUILD/bench/train_throughput/travel_trainer}
TRAVEL_WARNINGS=0
if [[ -z "${GPU_CHECK_TRAINER:-}" ]]; then
  NEEDS=""
  step travel_configure 120 $WRAP cmake "${TRAVEL_CMAKE_ARGS[@]}"
  NEEDS="travel_configure"
  step travel_build 300 $WRAP cmake --build "$TRAVEL_BUILD" --target travel_trainer -j "$JOBS"
  TRAVEL_WARNINGS=$(sed -n '/^== travel_build (/,/^== travel_build: exit/p' "$LOG" |
    grep -E "^($ROOT/)?(src|bench)/[^:]*:[0-9]+:[0-9]+: warning:" | sort -u | wc -l)
  log "Kestrel warnings in the travelling trainer's build: $TRAVEL_WARNINGS"
  NEEDS="travel_build"
  if [[ -d "$PREFIX/usr" ]]; then
    step travel_prefix 30 bash -c "$(declare -f prefix_only); CARRIED_HEADERS='$CARRIED_HEADERS' \
      CARRIED_LIBS='$CARRIED_LIBS' PREFIX='$PREFIX' prefix_only '$TRAVEL_BUILD'"
  fi
  # Every library the trainer loads comes from the prefix, from LibTorch's
  # own closure, or is the C/C++ runtime: anything else (or "not found") is
  # a package the carry lacks, which the dry run here would not notice.
  closure() {
    local torchlib torchdeps="" wheel="" lib bad=""
    # LibTorch's own closure: every libtorch*/libc10* library's (the CUDA
    # ones bring cudart, cuBLAS, cuDNN...), and on the device anything under
    # the wheel's site-packages (torch/lib, nvidia/*/lib).
    for lib in $(ldd "$TRAINER" | awk '$1 ~ /^lib(torch|c10)/ && $3 ~ /^\// {print $3}'); do
      torchdeps+=$(ldd "$lib" | awk '{print $1}')$'\n'
    done
    torchlib=$(ldd "$TRAINER" | awk '$1 ~ /^libtorch_cpu/ {print $3}')
    [[ -n "$torchlib" && "$torchlib" != /usr/* ]] && wheel=$(dirname "$(dirname "$(dirname "$torchlib")")")
    while read -r name path; do
      [[ "$path" == "$PREFIX"/* ]] && continue
      [[ -n "$wheel" && "$path" == "$wheel"/* ]] && continue
      # The C/C++ runtime and the NVIDIA driver are the machine's own.
      [[ "$name" =~ ^(libc|libm|libstdc\+\+|libgcc_s|libpthread|libdl|librt|libcuda)\.so ]] && continue
      [[ "$name" == libtorch* || "$name" == libc10* ]] && continue
      grep -qxF "$name" <<<"$torchdeps" && continue
      bad+="$name => $path"$'\n'
    done < <(ldd "$TRAINER" | awk '/=>/ {print $1, $3}')
    if [[ -n "$bad" ]]; then
      echo "libraries neither carried nor LibTorch's nor the C/C++ runtime:"
      printf '%s' "$bad"
      return 1
    fi
    echo "$(ldd "$TRAINER" | grep -c '=>') libraries: $(ldd "$TRAINER" | grep -c "$PREFIX") from $PREFIX, the rest LibTorch's or the C/C++ runtime"
  }
  step travel_closure 30 env LD_LIBRARY_PATH="${PREFIX_LIBDIRS:-}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    bash -c "$(declare -f closure); TRAINER='$TRAINER' PREFIX='$PREFIX' closure"
  step travel_audit 60 env LD_LIBRARY_PATH="${PREFIX_LIBDIRS:-}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    "$ROOT/tools/gpu/audit-torch-only.sh" --travel "$TRAVEL_BUILD" "$TRAINER"
fi
e2e() {
  set -u
  local home run
  home=$(mktemp -d /tmp/kestrel-e2e-home.XXXXXX)
  run=$home/runs
  export KESTREL_HOME=$home
  echo "trainer: $TRAINER, home $home"
  echo "libraries: $(ldd "$TRAINER" | grep -c '=>') loaded, from the prefix: $(ldd "$TRAINER" | grep -c "$PREFIX")," \
    "not found: $(ldd "$TRAINER" | grep -c 'not found')"
  "$TRAINER" synth "$home/shapes" images="$E2E_IMAGES" classes=3 imgsz="$E2E_IMGSZ" seed=1 || return 1
  "$TRAINER" import "$home/shapes" shapes || return 1
  # 4 epochs, SIGTERM once epoch 3 is in results.csv: the trainer finishes the
  # step, writes weights/last.ckpt and exits 8 (stopped); resume= does epoch 4.
  local t0 t1 pid rows rc
  t0=$(date +%s)
  "$TRAINER" train data=shapes model=n imgsz="$E2E_IMGSZ" batch="$E2E_BATCH" nbs="$E2E_BATCH" epochs=4 \
    warmup_epochs=1 close_mosaic=1 plots=false seed=1 device="$DEVICE" project="$run" name=train &
  pid=$!
  rows=0
  while kill -0 "$pid" 2>/dev/null; do
    [[ -f "$run/train/results.csv" ]] && rows=$(($(wc -l <"$run/train/results.csv") - 1))
    if ((rows >= 3)); then
      kill -TERM "$pid"
      break
    fi
    sleep 0.2
  done
  wait "$pid"
  rc=$?
  t1=$(date +%s)
  echo "first run: exit $rc after $((t1 - t0))s with $rows epochs in results.csv (8 = stopped, as asked)"
  [[ $rc == 8 && -f "$run/train/weights/last.ckpt" ]] || return 1
  "$TRAINER" train resume="$run/train/weights/last.ckpt" || return 1
  echo "resumed run: exit 0 after $(($(date +%s) - t1))s"
  echo "results.csv:"
  cat "$run/train/results.csv"
}
NEEDS=""
[[ -z "${GPU_CHECK_TRAINER:-}" ]] && NEEDS="travel_build"
if [[ -n "${GPU_CHECK_TRAINER:-}" && ! -x "$TRAINER" ]]; then
  RC[e2e]=skipped
  printf 'e2e\tskipped\t0\tno travel_trainer at %s\n' "$TRAINER" >>"$STEPS"
  log "== e2e: skipped (no travel_trainer at $TRAINER)"
else
  # The whole step under WRAP (one lock), so that SIGTERM reaches the trainer itself.
  step e2e 240 $WRAP env LD_LIBRARY_PATH="${PREFIX_LIBDIRS:-}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    bash -c "$(declare -f e2e); TRAINER='$TRAINER' PREFIX='$PREFIX' E2E_IMAGES=$E2E_IMAGES \
    E2E_IMGSZ=$E2E_IMGSZ E2E_BATCH=$E2E_BATCH DEVICE=$DEVICE e2e 2>&1 | tee '$OUT/e2e.txt'; exit \${PIPESTATUS[0]}"
fi

# ---- summary
TOTAL=$(($(date +%s) - START))
"$PY" - "$OUT" "$TOTAL" "$WARNINGS" "$E2E_BATCH" "$TRAVEL_WARNINGS" <<'EOF' || python3 -c 'print("summary: python failed")'
import json, os, re, sys
out, total, warnings, e2e_batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
travel_warnings = int(sys.argv[5])
steps = []
for line in open(os.path.join(out, ".steps.tsv")):
    name, rc, secs, note = (line.rstrip("\n").split("\t") + [""])[:4]
    steps.append({"step": name, "exit": int(rc) if rc.lstrip("-").isdigit() else rc, "seconds": int(secs),
                  "note": note})
def lines(name):
    p = os.path.join(out, name)
    return [json.loads(l) for l in open(p) if l.strip().startswith("{")] if os.path.exists(p) else []
table = {}
tp = os.path.join(out, ".table.json")
if os.path.exists(tp):
    table = json.load(open(tp))
facts = open(os.path.join(out, "facts.txt")).read() if os.path.exists(os.path.join(out, "facts.txt")) else ""
# e2e.txt: the last it/s of each epoch's progress line (x batch = images/s), the exits, the last results.csv row.
e2e = None
ep = os.path.join(out, "e2e.txt")
if os.path.exists(ep):
    text = open(ep).read()
    ips = {}
    for m in re.finditer(r"epoch (\d+)/\d+ .*?([0-9.]+) it/s", text):
        ips[int(m.group(1))] = float(m.group(2)) * e2e_batch
    first = re.search(r"first run: exit (\d+) after (\d+)s with (\d+) epochs", text)
    resumed = re.search(r"resumed run: exit (\d+) after (\d+)s", text)
    rows = [l.split(",") for l in text.splitlines() if re.match(r"^\d+,", l)]
    head = next((l.split(",") for l in text.splitlines() if l.startswith("epoch,")), None)
    last = dict(zip(head, rows[-1])) if head and rows else {}
    e2e = {"train_images_per_s_by_epoch": ips,
           "first_run": {"exit": int(first.group(1)), "seconds": int(first.group(2)),
                         "epochs_done": int(first.group(3))} if first else None,
           "resumed_run": {"exit": int(resumed.group(1)), "seconds": int(resumed.group(2))} if resumed else None,
           "last_epoch": last}
summary = {"total_seconds": total, "e2e": e2e, "kestrel_warnings": warnings,
           "travel_trainer_warnings": travel_warnings, "steps": steps, "facts": facts,
           "kestrel": lines("kestrel.jsonl"), "reference": lines("reference.jsonl"), "table": table,
           "ok": all(s["exit"] == 0 for s in steps if s["exit"] != "skipped")}
tmp = os.path.join(out, "summary.json.tmp")
with open(tmp, "w") as f:
    json.dump(summary, f, indent=1)
os.replace(tmp, os.path.join(out, "summary.json"))
print("summary: %s, %d steps (%s), %ds" % ("ok" if summary["ok"] else "FAILED STEPS", len(steps),
      ", ".join("%s=%s" % (s["step"], s["exit"]) for s in steps), total))
EOF
rm -f "$OUT/.steps.tsv" "$OUT/.table.json" "$OUT/.smi-kestrel.csv" "$OUT/.smi-reference.csv"
exit 0
