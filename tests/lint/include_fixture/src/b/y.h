#pragma once
#include "a/clean.h"
#include "a/internal/p.h"
