package context_test

import (
	stdctx "context"
	"fmt"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/hashicorp/go-hclog"
)

// greeter is a plugin: a value with Apply. Its Name is what logs and errors
// call its fiber.
type greeter struct{}

func (greeter) Name() string { return "greeter" }

func (greeter) Apply(ctx *dshctx.Context, config any) error {
	fmt.Printf("hello, %v\n", config)
	_, err := ctx.OnDispose("farewell", func() error {
		fmt.Println("goodbye")
		return nil
	})
	return err
}

func ExampleContext_Plugin() {
	root := dshctx.New(dshctx.WithLogger(hclog.NewNullLogger()))
	fiber, err := root.Plugin(greeter{}, "world")
	if err != nil {
		panic(err)
	}
	fmt.Println(fiber.Name(), fiber.State())
	root.Dispose(stdctx.Background()) // disposes every fiber in the tree
	fmt.Println(fiber.State())
	// Output:
	// hello, world
	// greeter active
	// goodbye
	// disposed
}

// Clock is a service; the key is declared once, next to the type.
type Clock struct{ Now string }

var ClockKey = dshctx.NewKey[*Clock]("clock")

func ExampleKey() {
	root := dshctx.New(dshctx.WithLogger(hclog.NewNullLogger()))
	defer root.Dispose(stdctx.Background())

	// The consumer injects the key, so it waits until a clock is provided.
	consumer, _ := root.Plugin(dshctx.Define("consumer", func(ctx *dshctx.Context, _ any) error {
		clock, err := ClockKey.Get(ctx)
		if err != nil {
			return err
		}
		fmt.Println("it is", clock.Now)
		return nil
	}, ClockKey), nil)
	fmt.Println("consumer:", consumer.State())

	provider, _ := root.Plugin(dshctx.Define("clock", func(ctx *dshctx.Context, _ any) error {
		return ClockKey.Provide(ctx, &Clock{Now: "noon"})
	}), nil)
	fmt.Println("consumer:", consumer.State())

	// Without its provider the consumer goes back to waiting.
	provider.Dispose(stdctx.Background())
	fmt.Println("consumer:", consumer.State())
	// Output:
	// consumer: pending
	// it is noon
	// consumer: active
	// consumer: pending
}
