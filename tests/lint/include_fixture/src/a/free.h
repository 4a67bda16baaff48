#pragma once
#include "a/mid.h"
