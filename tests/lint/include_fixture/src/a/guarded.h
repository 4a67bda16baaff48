#pragma once
// Fixture: a header only b may include ("only b include guarded.h" in a/README.md).
