// Fixture: the composition root may include the other adapter and the backend.
#include "d/q.h"
#include "e/r.h"
