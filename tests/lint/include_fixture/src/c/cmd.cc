// Fixture: an adapter file that is no composition root includes another adapter and a backend.
#include "d/q.h"
#include "e/r.h"
