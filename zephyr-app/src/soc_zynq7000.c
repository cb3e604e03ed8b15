/*
 * latscope on Zynq-7000 (qemu_cortex_a9, real Zynq boards) with Zephyr 3.7.x: identity-map the
 * System Level Control Registers (SLCR, 0xF8000000, 4 KiB) in the MMU before the GEM driver
 * initialises. The GEM driver writes its clock control register (GEMx_CLK_CTRL) in the SLCR,
 * but the Zynq-7000 SoC's MMU table on 3.7.1 (soc/xlnx/zynq7000/xc7zxxxs/soc.c) has no SLCR
 * entry, so that write takes a data abort. Upstream later added the entry to the SoC table;
 * this file does the same at run time, so no Zephyr source changes. Harmless where the entry
 * exists (the same page is mapped again with the same attributes).
 * SPDX-License-Identifier: BSD-2-Clause
 */
#include <zephyr/devicetree.h>
#include <zephyr/init.h>
#include <zephyr/kernel.h>
#include <zephyr/kernel/mm.h>

#define SLCR_NODE DT_NODELABEL(slcr)
BUILD_ASSERT(DT_NODE_EXISTS(SLCR_NODE), "Zynq-7000 devicetree without the slcr node");

/* Kernel-internal (kernel/include/kernel_arch_interface.h); implemented by the ARMv7-A MMU
 * code (arch/arm/core/mmu/arm_mmu.c), which maps 4 KiB pages virt -> phys. */
void arch_mem_map(void *virt, uintptr_t phys, size_t size, uint32_t flags);

static int latscope_map_slcr(void)
{
	uintptr_t base = DT_REG_ADDR(SLCR_NODE);

	arch_mem_map((void *)base, base, DT_REG_SIZE(SLCR_NODE), K_MEM_PERM_RW | K_MEM_CACHE_NONE);
	return 0;
}

/* PRE_KERNEL_1: after the MMU is on (z_arm_mmu_init runs in z_prep_c), before any driver. */
SYS_INIT(latscope_map_slcr, PRE_KERNEL_1, 0);
