// Fixture: the composition root may include the other adapter.
#include "d/q.h"
