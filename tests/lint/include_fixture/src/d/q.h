// Fixture: an adapter header.
#pragma once
#include "a/clean.h"
