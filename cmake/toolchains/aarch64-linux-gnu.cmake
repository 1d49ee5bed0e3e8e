# Cross-compiling ferry for 64-bit Arm Linux on a Debian x86-64 host (scripts/cross-check): Debian's cross compiler
# (g++-aarch64-linux-gnu), the arm64 builds of the libraries (multiarch, apt install <pkg>:arm64), and qemu-aarch64
# to run what the build runs (test discovery) and the tests.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64;-L;/usr/aarch64-linux-gnu)
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
