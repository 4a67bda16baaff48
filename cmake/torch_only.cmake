# KESTREL_TORCH_ONLY=ON (docs/gpu.md): the LibTorch parts alone, for the GPU
# machine, whose image has CMake, a compiler and the CUDA LibTorch of its
# torch wheel but none of Kestrel's other C++ packages (no network, no apt).
# Built: kestrel_core, kestrel_model (the network, weights, the LibTorch
# version/CUDA shims), kestrel_train_core (loss + assigner, optimizer + EMA,
# the LR schedule, checkpoints) and bench/train_throughput's train_step_bench.
# Not built: everything that needs OpenCV (data loader, eval, predictor),
# SQLite/libpq (store, registry), CURL, Boost (server), ONNX/protobuf
# (export), CLI11 (the kestrel binary) — so no `kestrel train` here; with
# KESTREL_TRAVEL_TRAINER=ON (below) the trainer and travel_trainer instead.
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

# KESTREL_TRAVEL_TRAINER=ON (docs/gpu.md "The travelling trainer"): also the
# trainer's own modules — the S3 client and the store (SQLite, libpq, CURL,
# pugixml), the data loader and the evaluator (OpenCV core + imgproc,
# libjpeg-turbo, libpng) — and bench/train_throughput's travel_trainer, whose
# runtime libraries fit the device tool's carry (tools/gpu/fetch-debs.sh).
# Left out still: OpenCV's imgcodecs (GDAL: BMP/WebP/TIFF are refused by
# this build's decoder), dnn, videoio, Boost, ONNX/protobuf, CLI11, libarchive.
option(KESTREL_TRAVEL_TRAINER "With KESTREL_TORCH_ONLY: also build the trainer and travel_trainer (docs/gpu.md)" OFF)
if(KESTREL_TRAVEL_TRAINER)
  find_package(SQLite3 REQUIRED)
  find_package(pugixml REQUIRED)
  find_package(JPEG REQUIRED)
  find_package(PNG REQUIRED)
  # OpenCV's own CMake package (libopencv-dev) declares every module and
  # fails when a module's library is absent, so core and imgproc, the only
  # two carried, are imported from their files.
  find_path(KESTREL_OPENCV_INCLUDE opencv2/core.hpp PATH_SUFFIXES opencv4 REQUIRED)
  foreach(_cv core imgproc)
    find_library(KESTREL_OPENCV_${_cv} opencv_${_cv} REQUIRED)
    add_library(opencv_${_cv} SHARED IMPORTED)
    set_target_properties(opencv_${_cv} PROPERTIES IMPORTED_LOCATION ${KESTREL_OPENCV_${_cv}}
                                                   INTERFACE_INCLUDE_DIRECTORIES ${KESTREL_OPENCV_INCLUDE})
  endforeach()
  set_target_properties(opencv_imgproc PROPERTIES INTERFACE_LINK_LIBRARIES opencv_core)
  foreach(m s3 store data eval)
    add_subdirectory(${PROJECT_SOURCE_DIR}/src/${m} ${PROJECT_BINARY_DIR}/src/${m})
  endforeach()
endif()

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
if(KESTREL_TRAVEL_TRAINER)
  set(_kestrel_excluded_link "opencv_imgcodecs|opencv_dnn|opencv_videoio|opencv_freetype|Boost|onnx|protobuf|CLI11|GTest|archive")
else()
  set(_kestrel_excluded_link "opencv|SQLite|sqlite|PostgreSQL|libpq|CURL|curl|Boost|onnx|protobuf|pugixml|CLI11|GTest")
endif()
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
foreach(t kestrel_core kestrel_model kestrel_train_core kestrel_train train_step_bench travel_trainer)
  _kestrel_check_links(${t} _seen)
endforeach()

# The audit: every header the compiler opened and the binaries' NEEDED
# libraries (with KESTREL_TRAVEL_TRAINER, against that build's shorter list).
if(KESTREL_TRAVEL_TRAINER AND TARGET travel_trainer)
  add_test(NAME torch_only_audit
           COMMAND ${PROJECT_SOURCE_DIR}/tools/gpu/audit-torch-only.sh --travel ${PROJECT_BINARY_DIR}
                   $<TARGET_FILE:travel_trainer> $<TARGET_FILE:train_step_bench>)
elseif(TARGET train_step_bench)
  add_test(NAME torch_only_audit
           COMMAND ${PROJECT_SOURCE_DIR}/tools/gpu/audit-torch-only.sh ${PROJECT_BINARY_DIR}
                   $<TARGET_FILE:train_step_bench>)
endif()
