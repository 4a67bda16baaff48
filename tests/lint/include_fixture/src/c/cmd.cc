// Fixture: an adapter file that is no composition root includes another adapter.
#include "d/q.h"
