// Fixture: c may include a, but not a/guarded.h (only b may).
#include "a/guarded.h"
