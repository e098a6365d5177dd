# Cross build for 64-bit ARM Linux (Debian multiarch): scripts/arm64.sh.
# The compiler is Debian's g++-aarch64-linux-gnu; the libraries are the
# :arm64 packages in /usr/lib/aarch64-linux-gnu; ctest runs the test
# binaries under qemu-user (CMAKE_CROSSCOMPILING_EMULATOR), which also lets
# gtest_discover_tests list them at build time.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64;-L;/)
# Find the target's packages, never the host's.
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
