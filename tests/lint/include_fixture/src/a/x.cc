#include "a/clean.h"
#include "a/internal/p.h"
#include "b/y.h"
#include <torch/torch.h>
#include <unknownlib/foo.h>
#include <opencv2/imgproc.hpp>
#include <sys/stat.h>
