// Fixture: b is named in a's "only ... include" clause: no violation.
#include "a/guarded.h"
