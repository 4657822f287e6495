// The coverage window: the LLVM profile runtime is linked only into a build with coverage. Weak references let the
// same source link without it (each then reads as null, and the window does nothing). Test code only.
#include "TestProcessSetup.h"

__attribute__((weak)) void __llvm_profile_reset_counters(void);
__attribute__((weak)) void __llvm_profile_set_filename(const char *);
__attribute__((weak)) int __llvm_profile_dump(void);

int rk_coverage_window_open(void) {
    if (!__llvm_profile_reset_counters || !__llvm_profile_set_filename || !__llvm_profile_dump) return 0;
    __llvm_profile_reset_counters();
    return 1;
}

int rk_coverage_window_close(const char *path) {
    if (!__llvm_profile_set_filename || !__llvm_profile_dump) return -1;
    // `__llvm_profile_dump` also marks the profile written: the exit handler writes nothing after it.
    __llvm_profile_set_filename(path);
    return __llvm_profile_dump();
}
