#pragma once
#include <vector>
#include "a/heavy.h"
