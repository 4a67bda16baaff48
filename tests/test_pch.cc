// The translation unit that carries tests/test_pch.h's precompiled header
// (the kestrel_test_pch targets in tests/CMakeLists.txt); it has no code.
#include "test_pch.h"
