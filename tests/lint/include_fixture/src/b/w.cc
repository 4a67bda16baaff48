// Fixture: a module below the adapters includes a backend (listing it under modules does not make that right).
#include "e/r.h"
