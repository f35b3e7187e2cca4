#include "textflag.h"

// func request(args *[6]uint64) uint64
//
// A valgrind client request (valgrind.h, VALGRIND_DO_CLIENT_REQUEST_EXPR for amd64): RAX points at
// the request and its five arguments, RDX holds the default result (returned when not running under
// valgrind, where the sequence below does nothing: RDI is rotated by 128 bits in all), and valgrind
// recognises the rotations followed by xchg %rbx,%rbx and puts its result in RDX. The instructions
// are written as bytes so that they are exactly valgrind's.
TEXT ·request(SB), NOSPLIT, $0-16
	MOVQ args+0(FP), AX
	MOVQ $0, DX
	BYTE $0x48; BYTE $0xc1; BYTE $0xc7; BYTE $0x03 // rolq $3, %rdi
	BYTE $0x48; BYTE $0xc1; BYTE $0xc7; BYTE $0x0d // rolq $13, %rdi
	BYTE $0x48; BYTE $0xc1; BYTE $0xc7; BYTE $0x3d // rolq $61, %rdi
	BYTE $0x48; BYTE $0xc1; BYTE $0xc7; BYTE $0x33 // rolq $51, %rdi
	BYTE $0x48; BYTE $0x87; BYTE $0xdb             // xchgq %rbx, %rbx
	MOVQ DX, ret+8(FP)
	RET
