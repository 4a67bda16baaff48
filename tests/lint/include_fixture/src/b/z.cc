// Fixture: a module below the adapters includes one (listing it under modules does not make that right).
#include "d/q.h"
