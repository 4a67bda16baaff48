# KESTREL_TORCH_ONLY=ON (docs/gpu.md): the LibTorch parts alone, for the GPU
# machine, whose image has CMake, a compiler and the CUDA LibTorch of its
# torch wheel but none of Kestrel's other C++ packages (no network, no apt).
# Built: kestrel_core, kestrel_model (the network, weights, the LibTorch
# version/CUDA shims), kestrel_train_core (loss + assigner, optimizer + EMA,
# the LR schedule, checkpoints) and bench/train_throughput's train_step_bench.
# Not built: everything that needs OpenCV (data loader, eval, predictor),
# SQLite/libpq (store, registry), CURL, Boost (server), ONNX/protobuf
# (export), CLI11 (the kestrel binary) — so no `kestrel train` here.
# core's own packages (OpenSSL, nlohmann_json, spdlog + fmt, yaml-cpp) are
# still needed: tools/gpu/fetch-debs.sh downloads them as .deb files that the
# GPU machine unpacks into a prefix (CMAKE_PREFIX_PATH / OPENSSL_ROOT_DIR).
# A post-configure check (below) and the ctest torch_only_audit (header deps
# and NEEDED libraries of the built binary) keep the excluded packages out.

find_package(Threads REQUIRED)
find_package(OpenSSL REQUIRED)
find_package(nlohmann_json 3 REQUIRED)
find_package(spdlog REQUIRED)
find_package(yaml-cpp REQUIRED)
find_package(Torch REQUIRED)

add_subdirectory(${PROJECT_SOURCE_DIR}/src/core ${PROJECT_BINARY_DIR}/src/core)

# The model without predictor.cc (eval's post-processing, OpenCV); spec.cc
# and the .pt reader (pt_checkpoint.cc, internal/pt_zip.cc, internal/pt_pickle.cc)
# are kestrel_model_spec's in the full build (src/model/CMakeLists.txt).
set(_m ${PROJECT_SOURCE_DIR}/src/model)
set(_kestrel_model_sources ${_m}/anchors.cc ${_m}/layers.cc ${_m}/yolo.cc ${_m}/weights.cc ${_m}/spec.cc
                           ${_m}/pt_checkpoint.cc ${_m}/internal/pt_zip.cc ${_m}/internal/pt_pickle.cc)
if(EXISTS ${_m}/torch_compat.cc)
  list(APPEND _kestrel_model_sources ${_m}/torch_compat.cc)
endif()
kestrel_module(model SOURCES ${_kestrel_model_sources} DEPS kestrel_core ${TORCH_LIBRARIES})
kestrel_torch_pch(kestrel_model)

set(_t ${PROJECT_SOURCE_DIR}/src/train)
kestrel_module(train_core
  SOURCES ${_t}/loss.cc ${_t}/loss_keys.cc ${_t}/assigner.cc ${_t}/optimizer.cc ${_t}/checkpoint.cc ${_t}/schedule.cc
  DEPS kestrel_model kestrel_core ${TORCH_LIBRARIES})
kestrel_torch_pch(kestrel_train_core)
# The torch-free TUs are compiled as in kestrel_model_spec and
# kestrel_train_config (src/model, src/train CMakeLists.txt): no torch PCH,
# and no FMA contraction (the schedule must reproduce the reference's double
# arithmetic bit for bit).
set_source_files_properties(${_m}/spec.cc ${_m}/pt_checkpoint.cc ${_m}/internal/pt_zip.cc
                            ${_m}/internal/pt_pickle.cc ${_t}/schedule.cc ${_t}/loss_keys.cc
                            PROPERTIES SKIP_PRECOMPILE_HEADERS ON COMPILE_OPTIONS -ffp-contract=off)

# ctest: torch_only_audit (below) and bench/train_throughput's gpu_reference_params.
enable_testing()
if(KESTREL_BUILD_BENCH)
  add_subdirectory(${PROJECT_SOURCE_DIR}/bench/train_throughput ${PROJECT_BINARY_DIR}/bench/train_throughput)
endif()

# The check: no torch-only target may link a package this build leaves out,
# directly or through another target.
set(_kestrel_excluded_link "opencv|SQLite|sqlite|PostgreSQL|libpq|CURL|curl|Boost|onnx|protobuf|pugixml|CLI11|GTest")
function(_kestrel_check_links target seen)
  if(NOT TARGET ${target} OR "${target}" IN_LIST ${seen})
    return()
  endif()
  list(APPEND ${seen} ${target})
  get_target_property(_libs ${target} INTERFACE_LINK_LIBRARIES)
  get_target_property(_type ${target} TYPE)
  if(NOT _type STREQUAL "INTERFACE_LIBRARY")
    get_target_property(_own ${target} LINK_LIBRARIES)
    if(_own)
      list(APPEND _libs ${_own})
    endif()
  endif()
  foreach(l IN LISTS _libs)
    if(l MATCHES "^kestrel_" OR l MATCHES "^\\$<")
      if(l MATCHES "^kestrel_")
        _kestrel_check_links(${l} ${seen})
      endif()
    elseif(l MATCHES "${_kestrel_excluded_link}")
      message(FATAL_ERROR "KESTREL_TORCH_ONLY: ${target} links '${l}', a package the torch-only build leaves out")
    endif()
  endforeach()
  set(${seen} ${${seen}} PARENT_SCOPE)
endfunction()
set(_seen "")
foreach(t kestrel_core kestrel_model kestrel_train_core train_step_bench)
  _kestrel_check_links(${t} _seen)
endforeach()

if(TARGET train_step_bench)
  add_test(NAME torch_only_audit
           COMMAND ${PROJECT_SOURCE_DIR}/tools/gpu/audit-torch-only.sh ${PROJECT_BINARY_DIR}
                   $<TARGET_FILE:train_step_bench>)
endif()
