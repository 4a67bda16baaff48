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

# The model (kestrel_model_spec, and kestrel_model without predictor.cc) and
# the loss/optimizer/schedule/checkpoint library kestrel_train_core are
# defined by their own modules' CMakeLists.txt, which read
# KESTREL_TORCH_ONLY.
set(KESTREL_WITH_TORCH ON)
add_subdirectory(${PROJECT_SOURCE_DIR}/src/model ${PROJECT_BINARY_DIR}/src/model)
add_subdirectory(${PROJECT_SOURCE_DIR}/src/train ${PROJECT_BINARY_DIR}/src/train)

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
