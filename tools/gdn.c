/* gdn — placeholder CLI until the full one lands. */
#include <stdio.h>

#include "gdn.h"

int main(void) {
    for (int i = 0; i < gdn_kernel_count(); ++i) printf("%s\n", gdn_kernel_name(i));
    return 0;
}
