// The build's version for lineage records; the header is generated each build.
#include "app/version.h"

#include "app/models.h"

namespace kestrel::app {

const char* KestrelVersion() { return KESTREL_BUILD_VERSION; }

}  // namespace kestrel::app
