# Accelerator probe for test/hosts/testhost (its bytes are PROBE_HEX in lib/machine.sh).
# Build: as --64 -o probe.o probe.S && ld -Ttext 0x7c00 --oformat binary -o probe.bin probe.o
# BIOS boot sector: real mode -> long mode (identity-mapped 2 MiB pages) -> 2 x 32 MiB of byte
# stores -> "EP-PROBE-OK" on COM1 -> 0x10 to isa-debug-exit at 0xf4 (QEMU exits with 33) -> hlt.
.code16
.globl _start
_start:
  cli
  xor %ax,%ax
  mov %ax,%ds
  mov %ax,%es
  mov %ax,%ss
  mov $0x7c00,%sp
  cld
  mov $0x3f8,%dx
  mov $'R',%al
  out %al,%dx
  in $0x92,%al
  or $2,%al
  out %al,$0x92
  mov $0x1000,%di
  mov $0x1800,%cx
  xor %ax,%ax
  rep stosw
  movl $0x2003,0x1000
  movl $0x3003,0x2000
  mov $0x3000,%di
  mov $0x83,%eax
  mov $64,%cx
1: mov %eax,(%di)
  add $8,%di
  add $0x200000,%eax
  loop 1b
  lgdtl gdtr
  mov %cr4,%eax
  or $0x20,%eax
  mov %eax,%cr4
  mov $0x1000,%eax
  mov %eax,%cr3
  mov $0xC0000080,%ecx
  rdmsr
  or $0x100,%eax
  wrmsr
  mov %cr0,%eax
  or $0x80000001,%eax
  mov %eax,%cr0
  ljmp $0x08,$long_entry
.code64
long_entry:
  mov $0x10,%ax
  mov %ax,%ds
  mov %ax,%es
  mov %ax,%ss
  mov $0x3f8,%dx
  mov $'L',%al
  out %al,%dx
  mov $2,%r8d
2: mov $0x400000,%rdi
  mov $0x2000000,%rcx
  xor %eax,%eax
3: add %cl,%al
  mov %al,(%rdi)
  inc %rdi
  dec %rcx
  jnz 3b
  dec %r8d
  jnz 2b
  lea msg(%rip),%rsi
4: lodsb
  test %al,%al
  jz 5f
  out %al,%dx
  jmp 4b
5: mov $0xf4,%dx
  mov $0x10,%al
  out %al,%dx
6: cli
  hlt
  jmp 6b
.p2align 3
gdt:
  .quad 0
  .quad 0x00209A0000000000
  .quad 0x0000920000000000
gdt_end:
gdtr:
  .word gdt_end-gdt-1
  .long gdt
msg: .asciz "EP-PROBE-OK\n"
.org 510
.word 0xaa55
