// Compiles the precompiled header that every LibTorch target reuses (CMakeLists.txt).
