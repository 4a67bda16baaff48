// Fixture: a backend's header (what a program's main() registers).
#pragma once
